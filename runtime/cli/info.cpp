// halformer info: what this build runs (kernel variants, GPU APIs, tuned
// schedules) and, given a model directory, the model.
//
//   halformer info              # the build
//   halformer info DIR          # the model's config, parameters, tokenizer, head; then the build
#include "common.h"

#include "halformer/build_info.h"
#include "halformer/isa.h"

#include <cstdio>

namespace halformer {

namespace {

void print_build_info() {
    std::string compiled;
#if defined(__aarch64__)
    compiled = "arm64 (arm-64-linux)";
#else
    for (Isa i : all_isas()) compiled += std::string(compiled.empty() ? "" : ", ") + isa_name(i);
#endif
    std::printf("kernel variants compiled: %s\n", compiled.c_str());
    std::printf("kernel variant this CPU runs: %s\n", running_variant());
#ifdef HALFORMER_HAS_GPU
    std::printf("GPU builds: cuda (sm_80 PTX; the driver compiles it for newer GPUs), opencl\n");
#else
    std::printf("GPU builds: none (configured with HALFORMER_GPU=OFF)\n");
#endif
    for (Device d : {Device::CUDA, Device::OpenCL}) {
        std::printf("device %s: %s\n", device_name(d), device_description(d).c_str());
    }
    std::printf("this CPU: %s\n", this_cpu().describe().c_str());
    const Fp32Packing packing = fp32_packing();
    std::printf("float32 projections: %s\n",
                packing == Fp32Packing::All     ? "weights packed once into 48-column panels (hf_linear_f32*)"
                : packing == Fp32Packing::Steps ? "decoding steps on weights packed once into 48-column panels "
                                                  "(hf_linear_f32*), prefill on weights as stored (hf_linear*)"
                                                : "weights as stored (hf_linear*)");
    {
        const TunedRecord *r = tuned_record(selected_isa());
        std::printf("schedules this CPU runs: %s\n", record_note(r).c_str());
    }
    // Every record compiled in: each is its own kernel set of its variant,
    // run where the CPU is the record's.
    for (Isa i : all_isas()) {
        bool any = false;
        for (const TunedRecord &r : tuned_records()) {
            if (r.target != isa_name(i)) continue;
            any = true;
            std::printf("schedules, %s: tuned record %s (%s; %s, %s), %zu kernels tuned, the rest hand; %s:\n",
                        isa_name(i), r.path.c_str(), r.machine.c_str(), r.cpu.c_str(), r.date.c_str(),
                        r.kernels.size(), record_matches_cpu(r) ? "runs on this CPU" : "for another CPU");
            for (const auto &k : r.kernels) std::printf("  %-28s %s\n", k.kernel.c_str(), k.params.c_str());
        }
        if (!any) std::printf("schedules, %s: hand (no tuned record for this variant)\n", isa_name(i));
    }
}

void print_model_info(const std::string &dir, const Model &m) {
    const Config &c = m.config();
    std::printf("model: %s\n", dir.c_str());
    const bool gguf = dir.size() > 5 && dir.compare(dir.size() - 5, 5, ".gguf") == 0;
    if (!c.family.empty()) {
        std::printf("format: %s, model_type \"%s\" (read as the Halformer config below)\n",
                    gguf ? (m.precision() == Precision::INT8
                                 ? "GGUF (as the Hugging Face checkpoint it was converted from, block-quantized weights "
                                   "packed from their blocks: Q4_0, Q4_1 and Q4_K 4-bit, the other types int8)"
                                 : "GGUF (as the Hugging Face checkpoint it was converted from, weights as float32)")
                         : "Hugging Face",
                    c.family.c_str());
    }
    std::printf("config:\n%s", c.to_json().c_str());
    std::printf("parameters: %lld (%.1f M)\n", (long long)m.parameter_count(), m.parameter_count() / 1e6);
    std::printf("precision: %s (projections; --precision fp32|bf16|int8)\n", precision_name(m.precision()));
    if (const int64_t packed = m.packed_weight_bytes()) {
        std::printf("packed weights: %.1f %s resident (the projections in their precision's panels, a token table kept as blocks)\n",
                    packed < 1000000 ? packed / 1e3 : packed / 1e6, packed < 1000000 ? "kB" : "MB");
    }
    if (m.has_tokenizer()) {
        const Tokenizer &t = m.tokenizer();
        std::printf("tokenizer: %s, %d pieces (pad %d, bos %d, eos %d, unk %d)\n", t.path().c_str(), t.vocab_size(),
                    t.pad_id(), t.bos_id(), t.eos_id(), t.unk_id());
    } else {
        std::printf("tokenizer: none (token ids only)\n");
    }
    if (c.has_decoder()) {
        std::printf("output projection: %s\n", m.tied_head() ? "tied to tgt_embed.weight" : "generator.weight");
    } else {
        const std::string head = m.has_head() ? "generator.weight, " + std::to_string(m.output_rows()) + " rows"
                                              : "none (logits are hidden states)";
        std::printf("head: %s\n", head.c_str());
    }
}

}  // namespace

int cmd_info(int argc, char **argv) {
    CLI::App app{"halformer info: this build's kernels and devices, and a model's configuration", "halformer info"};
    std::string dir;
    MachineOptions mo;
    app.add_option("dir", dir, "model directory or GGUF file (default: only the build)");
    add_machine_options(app, mo);
    add_precision_option(app, mo);
    if (!parse_command(app, argc, argv)) return 0;
    if (dir.empty()) {
        apply_machine_options(mo);
        print_build_info();
        return 0;
    }
    print_model_info(dir, load_model(dir, mo));
    print_build_info();
    return 0;
}

}  // namespace halformer
