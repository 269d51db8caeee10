// Checkpoints: a model directory plus Adam's moments and the step counters
// (trainer.json, read back with the JSON library), written file by file
// under temporary names; and the average of several checkpoints.
#include "trainer_impl.h"

#include "halformer/files.h"
#include "halformer/json.h"
#include "halformer/safetensors.h"

#include <sstream>

namespace halformer {
namespace {

std::string options_json(const TrainOptions &o) {
    std::ostringstream s;
    s.precision(9);
    s << "{\"label_smoothing\": " << o.label_smoothing << ", \"dropout\": " << o.dropout
      << ", \"warmup_steps\": " << o.warmup_steps << ", \"lr_scale\": " << o.lr_scale << ", \"beta1\": " << o.beta1
      << ", \"beta2\": " << o.beta2 << ", \"adam_eps\": " << o.adam_eps << ", \"clip_norm\": " << o.clip_norm
      << ", \"weight_decay\": " << o.weight_decay << ", \"seed\": " << o.seed << ", \"head_rows\": " << o.head_rows
      << "}";
    return s.str();
}


}  // namespace

// ---------------------------------------------------------------- checkpoints

void Trainer::save(const std::string &dir, bool weights_only, bool half, const std::string &user_json) const {
    Impl &t = *impl_;
    for (Scratch *x : {&t.params, &t.m1, &t.m2}) t.fetch(*x);
    files::make_dirs(dir);
    json::parse(user_json, "checkpoint user data");  // must be valid JSON
    std::vector<TensorRef> refs;
    for (auto &e : t.table) refs.push_back({e.name, e.shape, t.params.get() + e.offset});
    files::write_atomic(dir + "/model.safetensors",
                 [&](const std::string &p) { write_safetensors(p, refs, half ? DType::F16 : DType::F32); });
    files::write_text(dir + "/config.json", t.cfg.to_json());
    if (weights_only) return;
    std::vector<TensorRef> moments{{"adam.m", {(int64_t)t.P}, t.m1.get()}, {"adam.v", {(int64_t)t.P}, t.m2.get()}};
    files::write_atomic(dir + "/optimizer.safetensors", [&](const std::string &p) { write_safetensors(p, moments); });
    std::ostringstream s;
    s << "{\n  \"steps\": " << t.steps << ",\n  \"micro_steps\": " << t.micro_steps << ",\n  \"flat_size\": " << t.P
      << ",\n  \"aliases\": {";
    bool first = true;
    for (auto &[a, target] : aliases_of(t.table)) {
        s << (first ? "" : ", ") << json::quote(a) << ": " << json::quote(target);
        first = false;
    }
    s << "},\n  \"options\": " << options_json(t.opt) << ",\n  \"user\": " << user_json << "\n}\n";
    files::write_text(dir + "/trainer.json", s.str());
}

std::string Trainer::checkpoint_user_json(const std::string &dir) {
    const std::string path = dir + "/trainer.json";
    json::Value st = json::parse(files::read_text(path), path);
    const json::Value *u = st.find("user");
    if (!u || !u->is_object()) return "{}";
    std::ostringstream s;
    s.precision(17);
    s << "{";
    bool first = true;
    for (auto &[k, v] : u->object) {
        s << (first ? "" : ", ") << json::quote(k) << ": ";
        if (v.is_number()) {
            s << v.number;
        } else if (v.is_string()) {
            s << json::quote(v.string);
        } else if (v.is_bool()) {
            s << (v.boolean ? "true" : "false");
        } else {
            s << "null";
        }
        first = false;
    }
    s << "}";
    return s.str();
}

void average_checkpoints(const std::vector<std::string> &dirs, const std::string &out, bool half) {
    if (dirs.empty()) throw Error("average: no checkpoints given");
    TrainOptions opt;
    Trainer acc = Trainer::from_model(dirs[0], opt);
    Trainer::Impl &a = *acc.impl_;
    Session &k = a.mi();
    DeviceScope scope(k.dev.get());
    const float inv = 1.0f / (float)dirs.size();
    View pa(a.params.get(), {{(int)a.P, 1}});
    k.run("axpy", [&] { return HF_PICK(k.device(), hf_axpy)(pa.get(), pa.get(), inv, 0.0f, pa.get()); });
    for (size_t i = 1; i < dirs.size(); i++) {
        Trainer other = Trainer::from_model(dirs[i], opt);
        Trainer::Impl &o = *other.impl_;
        if (o.cfg.to_json() != a.cfg.to_json()) throw Error(dirs[i] + ": config differs from " + dirs[0]);
        if (o.P != a.P || o.table.size() != a.table.size()) throw Error(dirs[i] + ": tensors differ from " + dirs[0]);
        for (size_t j = 0; j < a.table.size(); j++) {
            if (o.table[j].name != a.table[j].name || o.table[j].shape != a.table[j].shape) {
                throw Error(dirs[i] + ": tensor '" + o.table[j].name + "' differs from " + dirs[0]);
            }
        }
        View po(o.params.get(), {{(int)o.P, 1}});
        k.run("axpy", [&] { return HF_PICK(k.device(), hf_axpy)(pa.get(), po.get(), 1.0f, inv, pa.get()); });
    }
    acc.save(out, /*weights_only=*/true, half);
}

}  // namespace halformer
