#include "measure.h"

#include "halformer/build_info.h"

#include "halformer/error.h"
#include "progress.h"

#include <algorithm>
#include <cstdio>

namespace tune {

namespace {

// Generators are built here as libHalide's JIT sees them, with the inputs
// left unbound (as in the AOT build): one compiled candidate then runs at
// every shape by setting the inputs' Parameters, found by name in the
// pipeline. (Halide 14 keeps build_pipeline() protected; Access reaches it.)
struct Access : Halide::Internal::GeneratorBase {
    static Halide::Pipeline build(Halide::Internal::GeneratorBase *g) {
        // configure() adds the optional inputs (residual, mask); GenGen runs
        // it before building, and so must we.
        (g->*(&Access::ensure_configure_has_been_called))();
        return (g->*(&Access::build_pipeline))();
    }
};

class ParamFinder : public Halide::Internal::IRGraphVisitor {
public:
    std::map<std::string, Halide::Internal::Parameter> params;

private:
    using IRGraphVisitor::visit;
    void visit(const Halide::Internal::Call *op) override {
        if (op->param.defined()) params.emplace(op->param.name(), op->param);
        IRGraphVisitor::visit(op);
    }
    void visit(const Halide::Internal::Variable *op) override {
        if (op->param.defined()) params.emplace(op->param.name(), op->param);
    }
};

std::map<std::string, Halide::Internal::Parameter> pipeline_params(const Halide::Pipeline &p) {
    ParamFinder finder;
    for (const Halide::Func &out : p.outputs())
        for (const auto &[name, fn] : Halide::Internal::find_transitive_calls(out.function())) fn.accept(&finder);
    return finder.params;
}

// Sets the pipeline's inputs to these values (and, for the autoschedulers,
// their estimates to those sizes).
void bind_values(const Halide::Pipeline &pipe, const std::vector<InputValue> &values, bool estimates) {
    auto params = pipeline_params(pipe);
    for (const InputValue &v : values) {
        auto it = params.find(v.name);
        if (it == params.end()) {
            // A scalar the algorithm does not use at these settings (q_offset
            // without the causal mask) is not in the pipeline, nor is an
            // optional buffer its form does not read.
            if (!v.buf.defined() || v.optional) continue;
            throw halformer::Error("the pipeline has no input named " + v.name);
        }
        Halide::Internal::Parameter prm = it->second;
        if (prm.is_buffer()) {
            // Written on the host: a GPU candidate copies it to the device on
            // its first run (without the flag it would read device memory
            // never written).
            Halide::Buffer<> b = v.buf;
            b.set_host_dirty();
            prm.set_buffer(b);
            if (estimates)
                for (int i = 0; i < v.buf.dimensions(); i++) {
                    prm.set_min_constraint_estimate(i, 0);
                    prm.set_extent_constraint_estimate(i, v.buf.dim(i).extent());
                }
        } else if (prm.type() == Halide::Float(32)) {
            prm.set_scalar<float>((float)v.scalar);
        } else if (prm.type() == Halide::Int(32)) {
            prm.set_scalar<int32_t>((int32_t)v.scalar);
        } else {
            throw halformer::Error("input " + v.name + " has a scalar type the tuner does not set");
        }
    }
}

void bind_inputs(const Halide::Pipeline &pipe, OpData &d, bool estimates) { bind_values(pipe, d.inputs(), estimates); }

std::map<std::string, std::string> gen_params(const Task &task, const Shape &shape, const Point &p, Sched s) {
    auto params = task.fixed();
    for (const auto &[k, v] : shape.gen) params[k] = v;
    if (s == Sched::Hand) {
        for (const auto &[k, v] : p) params[k] = std::to_string(v);
    } else {
        params["auto_schedule"] = "true";
    }
    return params;
}

std::string gen_key(const Shape &s) {
    std::string k;
    for (const auto &[a, b] : s.gen) k += a + "=" + b + ";";
    return k;
}

std::string one_line(std::string e) {
    while (!e.empty() && (e.back() == '\n' || e.back() == ' ')) e.pop_back();
    for (char &c : e)
        if (c == '\n') c = ' ';
    if (e.size() > 300) e = e.substr(0, 300) + "...";
    return e;
}

// Runs a compiled candidate at one shape and checks it; "" or the problem.
std::string run_and_check(Halide::Pipeline &pipe, const Task &task,
                          const std::map<std::string, std::string> &params, const Shape &shape,
                          const Halide::Target &target, double *ms, bool checked = true) {
    auto data = make_op_data(task.generator(), params, shape);
    bind_inputs(pipe, *data, false);
    Halide::Realization out = data->outputs();
    // On a GPU the outputs stay on the device until asked for; a timed run
    // waits for the device to finish.
    auto run = [&] {
        pipe.realize(out, target);
        for (size_t i = 0; i < out.size(); i++) out[i].device_sync();
    };
    try {
        run();
        for (size_t i = 0; i < out.size(); i++) out[i].copy_to_host();
    } catch (const std::exception &e) {
        return "fails at " + shape.label + ": " + one_line(e.what());
    }
    if (!checked) return "";
    double err = data->error();
    if (!(err <= kTolerance)) {
        char buf[160];
        std::snprintf(buf, sizeof(buf), "wrong result at %s: relative error %.3g > %.0e", shape.label.c_str(), err,
                      kTolerance);
        return buf;
    }
    if (ms) *ms = time_ms(run);
    return "";
}

// Runs the bound pipeline into out and brings the outputs to the host.
void realize_to_host(Halide::Pipeline &pipe, Halide::Realization &out, const Halide::Target &target) {
    pipe.realize(out, target);
    for (size_t i = 0; i < out.size(); i++) out[i].copy_to_host();
}

// The address of element pos (part's coordinates) in b.
const uint8_t *element(const Halide::Buffer<> &b, const int *pos) {
    const halide_buffer_t *r = b.raw_buffer();
    int64_t off = 0;
    for (int i = 0; i < r->dimensions; i++) off += (int64_t)(pos[i] - r->dim[i].min) * r->dim[i].stride;
    return r->host + off * r->type.bytes();
}

// Whether every element of part has the bits of whole's element at the
// same coordinates (whole covers part's domain).
bool same_bits_within(const Halide::Buffer<> &part, const Halide::Buffer<> &whole) {
    if (part.type() != whole.type() || part.dimensions() != whole.dimensions()) return false;
    for (int i = 0; i < part.dimensions(); i++)
        if (part.dim(i).min() < whole.dim(i).min() || part.dim(i).max() > whole.dim(i).max()) return false;
    bool same = true;
    const int bytes = part.type().bytes();
    part.get()->for_each_element([&](const int *pos) {
        if (same) same = std::memcmp(element(part, pos), element(whole, pos), bytes) == 0;
    });
    return same;
}

// Whether the inputs of the call at `part` are the first of those at
// `whole`: the check means something only then (ops.h fills every buffer in
// memory order).
void require_prefix(const std::vector<InputValue> &wi, const std::vector<InputValue> &pi, const SameBits &sb) {
    for (const InputValue &v : pi) {
        auto w = std::find_if(wi.begin(), wi.end(), [&](const InputValue &x) { return x.name == v.name; });
        const bool prefix = w != wi.end() && (v.buf.defined() ? w->buf.defined() && same_bits_within(v.buf, w->buf)
                                                              : v.scalar == w->scalar);
        if (!prefix)
            throw halformer::Error("tuner: input " + v.name + " at " + sb.part.label + " is not the first rows of " +
                                   sb.whole.label + "'s");
    }
}

// A compiled pipeline's outputs on one shape's data.
Halide::Realization run_rows(Halide::Pipeline &pipe, OpData &data, const Halide::Target &target) {
    Halide::Realization out = data.outputs();
    bind_values(pipe, data.inputs(), false);
    realize_to_host(pipe, out, target);
    return out;
}

// The other kernel of a StepRows / PrefillRows pair, built with its own
// parameters and hand values, at one shape: its outputs are the same for
// every candidate, so they are made once.
const Halide::Realization &other_rows(const std::string &kernel, const Shape &shape, const Halide::Target &target) {
    static std::map<std::string, std::unique_ptr<Halide::Realization>> made;
    const std::string key = kernel + " " + shape.label + " " + target.to_string();
    auto it = made.find(key);
    if (it != made.end()) return *it->second;
    const KernelInfo &info = kernel_info(kernel);
    auto params = parse_params(info.params);
    for (const auto &[k, v] : shape.gen) params[k] = v;
    Halide::Pipeline pipe = build_pipeline(info.generator, params, target);
    pipe.compile_jit(target);
    auto data = make_op_data(info.generator, params, shape);
    auto out = std::make_unique<Halide::Realization>(run_rows(pipe, *data, target));
    return *made.emplace(key, std::move(out)).first->second;
}

// SameBits::Rows: the call at sb.part against the first rows of the call
// at sb.whole, bit for bit; StepRows and PrefillRows: one of the two calls
// made by the other kernel.
std::string check_rows(Halide::Pipeline &pipe, const Task &task, const std::map<std::string, std::string> &params,
                       const SameBits &sb, const Halide::Target &target) {
    auto whole = make_op_data(task.generator(), params, sb.whole);
    auto part = make_op_data(task.generator(), params, sb.part);
    require_prefix(whole->inputs(), part->inputs(), sb);
    const Halide::Realization wo = sb.kind == SameBits::StepRows ? other_rows(sb.other, sb.whole, target)
                                                                 : run_rows(pipe, *whole, target);
    const Halide::Realization po = sb.kind == SameBits::PrefillRows ? other_rows(sb.other, sb.part, target)
                                                                    : run_rows(pipe, *part, target);
    for (size_t i = 0; i < po.size(); i++) {
        if (same_bits_within(po[i], wo[i])) continue;
        if (sb.kind == SameBits::StepRows)
            return "breaks row invariance: a call at " + sb.part.label + " gives other bits than " + sb.other +
                   " (the prefill kernel) at " + sb.whole.label;
        if (sb.kind == SameBits::PrefillRows)
            return "breaks row invariance: a call at " + sb.whole.label + " gives its first rows other bits than " +
                   sb.other + " (the one-row kernel) at " + sb.part.label;
        return "breaks row invariance: a call at " + sb.part.label + " gives other bits than the same rows at " +
               sb.whole.label;
    }
    return "";
}

// Positions [begin, begin + extent) of dimension 1 of a (d, t, h, b)
// buffer, numbered from 0: a chunk of queries, a prefix of keys.
Halide::Buffer<float> positions(const Halide::Buffer<float> &b, int begin, int extent) {
    halide_dimension_t d[4];
    for (int i = 0; i < 4; i++) d[i] = b.raw_buffer()->dim[i];
    d[1].extent = extent;
    return Halide::Buffer<float>(const_cast<float *>(b.data()) + (size_t)begin * d[1].stride, 4, d);
}

// SameBits::CausalChunks: the queries in chunks of several lengths (a
// single query, odd ends, the rest), each over the keys it sees with
// q_offset at its first query, against one call over all of them.
std::string check_causal_chunks(Halide::Pipeline &pipe, const Task &task,
                                const std::map<std::string, std::string> &params, const SameBits &sb,
                                const Halide::Target &target) {
    auto data = make_op_data(task.generator(), params, sb.whole);
    std::vector<InputValue> in = data->inputs();
    Halide::Realization out = data->outputs();
    bind_values(pipe, in, false);
    realize_to_host(pipe, out, target);
    Halide::Buffer<float> whole = out[0], chunked(whole.copy());
    chunked.fill(-7.0f);
    auto value = [&](const char *name) -> InputValue & {
        for (InputValue &v : in)
            if (v.name == name) return v;
        throw halformer::Error(std::string("tuner: attention data has no input ") + name);
    };
    const Halide::Buffer<float> q = value("q").buf, k = value("k").buf, v = value("v").buf;
    const int Tq = q.dim(1).extent(), q_offset = (int)value("q_offset").scalar;
    std::vector<int> ends{0};
    for (int e : {40, 41, 100, Tq})
        if (e > ends.back() && e <= Tq) ends.push_back(e);
    for (size_t c = 0; c + 1 < ends.size(); c++) {
        const int begin = ends[c], n = ends[c + 1] - begin, keys = q_offset + ends[c + 1];
        std::vector<InputValue> chunk = in;
        for (InputValue &x : chunk) {
            if (x.name == "q") x.buf = positions(q, begin, n);
            if (x.name == "k") x.buf = positions(k, 0, keys);
            if (x.name == "v") x.buf = positions(v, 0, keys);
            if (x.name == "q_offset") x.scalar = q_offset + begin;
        }
        std::vector<Halide::Buffer<>> view{positions(chunked, begin, n)};
        Halide::Realization o(view);
        bind_values(pipe, chunk, false);
        realize_to_host(pipe, o, target);
    }
    if (std::memcmp(whole.data(), chunked.data(), whole.size_in_bytes()) != 0)
        return "breaks the causal chunks' bits: a prefill at " + sb.whole.label +
               " in query chunks gives other bits than one call";
    return "";
}

// The task's bit-identities for the compiled pipeline of one group of
// shapes: "" or the first one broken.
std::string check_same_bits(Halide::Pipeline &pipe, const Task &task, const Point &p, Sched s,
                            const std::string &group, const Halide::Target &target) {
    for (const SameBits &sb : task.same_bits) {
        // (the candidate's shape: StepRows runs it at the part only)
        const Shape &mine = sb.kind == SameBits::StepRows ? sb.part : sb.whole;
        if (gen_key(mine) != group) continue;
        auto params = gen_params(task, mine, p, s);
        std::string err = sb.kind == SameBits::CausalChunks ? check_causal_chunks(pipe, task, params, sb, target)
                                                            : check_rows(pipe, task, params, sb, target);
        if (!err.empty()) return err;
    }
    return "";
}

// Schedules pipe with an autoscheduler for shape (the estimates: its data's
// sizes), keeping the featurization and the schedule's source in m.
void autoschedule(Halide::Pipeline &pipe, const Task &task, const std::map<std::string, std::string> &params,
                  const Shape &shape, Sched s, const Halide::Target &target, int threads, Measured &m) {
    auto data = make_op_data(task.generator(), params, shape);
    bind_inputs(pipe, *data, true);
    auto extents = data->output_extents();
    auto outs = pipe.outputs();
    for (size_t i = 0; i < outs.size() && i < extents.size(); i++) {
        Halide::Region r;
        for (int e : extents[i]) r.push_back(Halide::Range(0, e));
        outs[i].set_estimates(r);
    }
    // Guarded: the autoscheduler's schedule with every tail guarded, as the
    // build's autoscheduled kernels (schedules/guarded_autoschedulers.cpp).
    // Machine parameters measured here: the tuner's threads and this CPU's
    // last-level cache (L3, else L2; 32 MiB when /sys does not say).
    const halformer::CpuInfo &cpu = halformer::this_cpu();
    const int64_t llc_kb = cpu.l3_kb > 0 ? cpu.l3_kb : cpu.l2_kb > 0 ? cpu.l2_kb : 32 << 10;
    auto res = pipe.auto_schedule(s == Sched::Adams ? "GuardedAdams2019" : "GuardedMullapudi2016", target,
                                  Halide::MachineParams(threads, llc_kb << 10, 40));
    m.featurization = res.featurization;
    m.schedule_source = res.schedule_source;
}

}  // namespace

Halide::Pipeline build_pipeline(const std::string &generator, const std::map<std::string, std::string> &params,
                                const Halide::Target &target) {
    auto gen = Halide::Internal::GeneratorRegistry::create(generator, Halide::GeneratorContext(target));
    Halide::Internal::GeneratorParamsMap gp;
    for (const auto &[k, v] : params) gp[k] = v;
    gen->set_generator_param_values(gp);
    return Access::build(gen.get());
}

double time_ms(const std::function<void()> &f, double budget_s) {
    f();  // warm: first-call allocations, page faults
    auto t0 = Clock::now();
    f();
    double one = std::max(seconds_since(t0), 1e-7);
    int inner = std::max(1, (int)(0.01 / one));
    int batches = std::clamp((int)(budget_s / (one * inner)), 3, 9);
    std::vector<double> v;
    for (int b = 0; b < batches; b++) {
        t0 = Clock::now();
        for (int i = 0; i < inner; i++) f();
        v.push_back(seconds_since(t0) / inner);
    }
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2] * 1e3;
}

// As the build compiles the task's kernels: a STRICT_FLOAT kernel's CPU
// builds in strict float (its rows' bits and its speed are those).
static Halide::Target kernel_target(const Task &task, const Halide::Target &build_target) {
    return kernel_info(task.kernel).strict_float && !build_target.has_gpu_feature()
               ? build_target.with_feature(Halide::Target::StrictFloat)
               : build_target;
}

struct Contender::Impl {
    struct Run {
        size_t pipe;
        std::unique_ptr<OpData> data;
        std::unique_ptr<Halide::Realization> out;
    };
    Halide::Target target;
    std::vector<Halide::Pipeline> pipes;
    std::vector<Run> runs;
};

Contender::Contender(const Task &task, const std::vector<Shape> &shapes, const Point &p,
                     const Halide::Target &build_target)
    : impl_(std::make_unique<Impl>()) {
    impl_->target = kernel_target(task, build_target);
    std::vector<std::string> groups;
    for (const auto &sh : shapes) {
        const std::string key = gen_key(sh);
        auto it = std::find(groups.begin(), groups.end(), key);
        if (it == groups.end()) {
            groups.push_back(key);
            impl_->pipes.push_back(build_pipeline(task.generator(), gen_params(task, sh, p, Sched::Hand),
                                                  impl_->target));
            impl_->pipes.back().compile_jit(impl_->target);
            it = groups.end() - 1;
        }
        Impl::Run r;
        r.pipe = it - groups.begin();
        r.data = make_op_data(task.generator(), gen_params(task, sh, p, Sched::Hand), sh);
        impl_->runs.push_back(std::move(r));
    }
}

Contender::~Contender() = default;

std::vector<double> Contender::time_pass() {
    std::vector<double> ms;
    for (auto &r : impl_->runs) {
        Halide::Pipeline &pipe = impl_->pipes[r.pipe];
        bind_inputs(pipe, *r.data, false);
        if (!r.out) r.out = std::make_unique<Halide::Realization>(r.data->outputs());
        Halide::Realization &out = *r.out;
        ms.push_back(time_ms(
            [&] {
                pipe.realize(out, impl_->target);
                for (size_t i = 0; i < out.size(); i++) out[i].device_sync();
            },
            0.05));
    }
    return ms;
}

Measured measure(const Task &task, const std::vector<Shape> &shapes, const Point &p, Sched s,
                 const Halide::Target &build_target, int threads, bool timed, const std::vector<Shape> *edges,
                 bool checked) {
    const Halide::Target target = kernel_target(task, build_target);
    Measured m;
    m.ms.assign(shapes.size(), 0.0);
    std::vector<std::string> groups;
    for (const auto &sh : shapes)
        if (std::find(groups.begin(), groups.end(), gen_key(sh)) == groups.end()) groups.push_back(gen_key(sh));
    try {
        for (const auto &group : groups) {
            size_t first = 0;
            while (gen_key(shapes[first]) != group) first++;
            auto params = gen_params(task, shapes[first], p, s);
            Halide::Pipeline pipe = build_pipeline(task.generator(), params, target);
            if (s != Sched::Hand) autoschedule(pipe, task, params, shapes[first], s, target, threads, m);
            pipe.compile_jit(target);
            for (size_t i = 0; i < shapes.size(); i++) {
                if (gen_key(shapes[i]) != group) continue;
                std::string err = run_and_check(pipe, task, params, shapes[i], target,
                                                timed ? &m.ms[i] : nullptr, checked);
                if (!err.empty()) {
                    m.error = err;
                    return m;
                }
            }
            if (checked) {
                std::string err = check_same_bits(pipe, task, p, s, group, target);
                if (!err.empty()) {
                    m.error = err;
                    return m;
                }
            }
            if (edges)
                for (const auto &e : *edges) {
                    if (gen_key(e) != group || !m.edge_error.empty()) continue;
                    m.edge_error = run_and_check(pipe, task, gen_params(task, e, p, s), e, target, nullptr);
                }
        }
    } catch (const std::exception &e) {
        m.error = one_line(e.what());
        return m;
    }
    m.ok = true;
    m.score = 0;
    for (double x : m.ms) m.score += x;
    return m;
}

// Every combination of the task's knob values.
std::vector<Point> all_points(const Task &t) {
    std::vector<Point> points{Point{}};
    for (const Knob &k : t.knobs) {
        std::vector<Point> next;
        for (const Point &p : points)
            for (int v : k.values) {
                Point q = p;
                q[k.name] = v;
                next.push_back(q);
            }
        points.swap(next);
    }
    return points;
}

int launch_only(const std::vector<Task> &tasks, const Halide::Target &target) {
    if (!target.has_gpu_feature()) throw halformer::Error("--launch-only is for --target cuda or opencl");
    int launched = 0, failed = 0, skipped = 0;
    for (const Task &t : tasks) {
        std::vector<Shape> shapes = t.shapes;
        shapes.insert(shapes.end(), t.edges.begin(), t.edges.end());
        for (const Point &p : all_points(t)) {
            if (!t.feasible(p, 0)) {
                skipped++;
                continue;
            }
            Measured m = measure(t, shapes, p, Sched::Hand, target, 1, false, nullptr, false);
            launched++;
            if (!m.ok) {
                failed++;
                std::printf("%s %s: %s\n", t.id().c_str(), point_key(p).c_str(), m.error.c_str());
            }
        }
    }
    std::printf("launch-only: %d candidates of %zu tasks compiled for %s and run at every shape, %d failed; "
                "%d outside the launch limits not tried\n",
                launched, tasks.size(), target.to_string().c_str(), failed, skipped);
    return failed ? 1 : 0;
}

}  // namespace tune
