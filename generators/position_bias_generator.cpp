// position_bias: T5's relative-position bias table, once per stack
//   out(n, h) = weight(bucket(n), h) for the relative positions n of out's
//   region (the runtime asks for n ∈ [−R, R]: a buffer whose dim 0 has min −R)
//
//   weight  [buckets, H]  Halide (h, bucket)  relative_attention_bias.weight
//   max_distance          relative distances from here on share the last
//                         bucket (relative_attention_max_distance)
//   out     [H, 2R+1]     Halide (n, h)       n = key − query position, from
//                         −R (dim 0's min) to R; the attention kernel's
//                         position_bias input (generators/attention_generator.cpp)
//
// The bucket of a relative position n = key − query (transformers'
// T5Attention._relative_position_bucket), with B buckets:
//   bidirectional (encoder): B ← B/2, bucket += B if n > 0, n ← |n|;
//   causal (decoder):        n ← max(−n, 0);
//   exact = B/2; n < exact: bucket += n; otherwise bucket +=
//   min(exact + ⌊log(n / exact) / log(max_distance / exact) · (B − exact)⌋, B − 1).
// The log is taken in float32 as transformers takes it (a float64 log puts
// some positions on the boundaries — n = 16, 32, 64 of the (32, 128)
// tables — into a different bucket). With R ≥ max_distance every position
// beyond ±R has the bucket of ±R, so a table of 2R + 1 entries serves any
// sequence length.
#include "Halide.h"
#include "common.h"
#include "../schedules/position_bias_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class PositionBias : public Generator<PositionBias> {
public:
    GeneratorParam<bool> bidirectional{"bidirectional", true};
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> weight{"weight"};
    Input<int32_t> max_distance{"max_distance"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() {
        /* THE ALGORITHM */
        Expr H = weight.dim(0).extent(), buckets = weight.dim(1).extent();
        Expr rel = c;
        Expr nb = bidirectional ? buckets / 2 : buckets;
        Expr base = bidirectional ? select(rel > 0, nb, 0) : 0;
        Expr n = bidirectional ? max(rel, -rel) : max(-rel, 0);
        Expr exact = max(nb / 2, 1);
        // Both logs in float32 (transformers: log(md / exact) in float64,
        // rounded to float32 when it divides a float32 tensor; the same float
        // wherever float32's log is within half an ulp). n < exact is
        // selected away; max() keeps its log finite.
        Expr ratio = log(cast<float>(max(max_distance, exact + 1)) / cast<float>(exact));
        Expr scaled = log(cast<float>(max(n, exact)) / cast<float>(exact)) / ratio * cast<float>(nb - exact);
        Expr large = min(exact + cast<int>(max(scaled, 0.0f)), nb - 1);
        Expr bucket = base + select(n < exact, n, large);
        out(c, h) = weight(clamp(h, 0, H - 1), clamp(bucket, 0, buckets - 1));

        /* ESTIMATES: T5-small, 8 heads, 32 buckets, max distance 128 */
        weight.set_estimates({{0, 8}, {0, 32}});
        max_distance.set_estimate(128);
        out.set_estimates({{-128, 257}, {0, 8}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        schedule_position_bias(out, c, h, get_target());
    }

private:
    Var c{"c"}, h{"h"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(PositionBias, position_bias)
