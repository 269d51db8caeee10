// embedding: token lookup × scale + positional encoding
//   out[b, t, :] = table[tokens[b, t], :] · scale + PE(start_pos[b] + t)
//
//   tokens    [B, T] int32    Halide (t, b)
//   table     [V, D]          Halide (d, v)   nn.Embedding.weight
//   pos_table [P, D]          Halide (d, p)   only when pe=learned
//   types     [B, T] int32    Halide (t, b)   only when token_types=true:
//   type_table [Ty, D]        Halide (d, y)   BERT's segment embeddings,
//                             out += type_table[types[b, t]]
//   start_pos [B] int32       Halide (b): position of token 0 of each
//                             sequence (its cache length when decoding
//                             incrementally: rows of one batch may be at
//                             different positions)
//   scale                     √D as in the paper (section 3.4), or 1
//   out       [B, T, D]       Halide (d, t, b)
//
// pe ∈ {sinusoidal: the paper's PE(p, 2i) = sin(p / 10000^(2i/D)),
//                   PE(p, 2i+1) = cos(p / 10000^(2i/D));
//       sinusoidal_concat: the same frequencies laid out as [sin … | cos …]
//                   halves, out[i] = sin(p·ω_i), out[D/2 + i] = cos(p·ω_i);
//       learned: pos_table[p]; none}.
// The angle p·ω is formed and reduced modulo 2π in double precision, so the
// encoding is accurate to fp32 rounding at any position (a plain fp32 angle
// loses ~1e-4 by position 2000).
// A token id outside [0, V), a learned position outside [0, P), or a token
// type outside [0, Ty) is an error
// returned to the caller (the kernel returns nonzero); nothing is read out of
// bounds. The checks cover exactly the tokens given, whatever region a
// schedule computes.
#include "Halide.h"
#include "common.h"
#include "../schedules/embedding_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

enum class PE { None, Sinusoidal, SinusoidalConcat, Learned };

class Embedding : public Generator<Embedding> {
public:
    GeneratorParam<PE> pe{"pe", PE::Sinusoidal,
                          {{"none", PE::None},
                           {"sinusoidal", PE::Sinusoidal},
                           {"sinusoidal_concat", PE::SinusoidalConcat},
                           {"learned", PE::Learned}}};

    GeneratorParam<bool> token_types{"token_types", false};
    GeneratorParam<int> tokens_per_task{"tokens_per_task", 8};
    GeneratorParam<int> gpu_threads{"gpu_threads", 0};  // GPU threads per token row (0: 128)
    // The kernel name tuned records know this build by (set by the build; see
    // schedules/tuned.h). Empty: hand values only.
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<int32_t, 2>> tokens{"tokens"};
    Input<Buffer<float, 2>> table{"table"};
    Input<Buffer<int32_t, 1>> start_pos{"start_pos"};
    Input<float> scale{"scale"};
    Input<Buffer<float, 2>> *pos_table = nullptr;
    Input<Buffer<int32_t, 2>> *types = nullptr;
    Input<Buffer<float, 2>> *type_table = nullptr;
    Output<Buffer<float, 3>> out{"out"};

    void configure() {
        if (pe == PE::Learned) pos_table = add_input<Buffer<float, 2>>("pos_table");
        if (token_types) {
            types = add_input<Buffer<int32_t, 2>>("types");
            type_table = add_input<Buffer<float, 2>>("type_table");
        }
    }

    void generate() {
        /* THE ALGORITHM */
        Expr D = table.dim(0).extent(), V = table.dim(1).extent();
        Expr tok = tokens(t, b);
        // Every sequence given needs its start position (checked with the
        // ids, over exactly the tokens given: `tokens` is read unclamped).
        Expr has_start = b >= start_pos.dim(0).min() && b <= start_pos.dim(0).max();
        token(t, b) = require(tok >= 0 && tok < V, require(has_start, tok, "start_pos has no entry for sequence", b),
                              "token id", tok, "is outside the vocabulary [0,", V, ")");
        Expr pos = start_pos(clamp(b, start_pos.dim(0).min(), start_pos.dim(0).max())) + t;
        Expr e = table(d, clamp(token(t, b), 0, V - 1)) * scale;
        if (pe == PE::Sinusoidal || pe == PE::SinusoidalConcat) {
            Expr half = D / 2;
            Expr i = (pe == PE::Sinusoidal) ? d / 2 : select(d < half, d, d - half);
            Expr is_sin = (pe == PE::Sinusoidal) ? (d % 2 == 0) : (d < half);
            // ω_i = 10000^(−2i/D) = exp(−2i·ln(10000)/D)
            Expr ln_10000 = Expr(std::log(10000.0));
            Expr two_pi = Expr(6.283185307179586);
            Expr omega = exp(cast<double>(-2 * i) * ln_10000 / cast<double>(D));
            Expr angle = cast<double>(pos) * omega;
            Expr reduced = cast<float>(angle - two_pi * floor(angle / two_pi));
            e += select(is_sin, sin(reduced), cos(reduced));
        } else if (pe == PE::Learned) {
            // Only the positions of the tokens given are checked: a schedule
            // may compute `position` over a larger range (a split rounded up
            // to its tile: Adams2019 does so for a Func that reads no input),
            // and a position computed there but never stored must not refuse
            // a valid call. (tokens covers every t of `out`, or the kernel
            // refuses the call for reading tokens out of bounds.) The read is
            // clamped either way.
            Expr P = pos_table->dim(1).extent();
            Expr given = t >= tokens.dim(0).min() && t <= tokens.dim(0).max() && b >= tokens.dim(1).min() &&
                         b <= tokens.dim(1).max();
            position(t, b) = require(!given || (pos >= 0 && pos < P), pos,
                                  "position", pos, "is past the learned position table of", P);
            e += (*pos_table)(d, clamp(position(t, b), 0, P - 1));
        }
        if (token_types) {
            Expr Ty = type_table->dim(1).extent(), y = (*types)(t, b);
            type(t, b) = require(y >= 0 && y < Ty, y, "token type", y, "is outside the type table [0,", Ty, ")");
            e += (*type_table)(d, clamp(type(t, b), 0, Ty - 1));
        }
        out(d, t, b) = e;

        /* ESTIMATES: 1 × 128 tokens of the paper's 37000-word vocabulary */
        tokens.set_estimates({{0, 128}, {0, 1}});
        table.set_estimates({{0, 512}, {0, 37000}});
        start_pos.set_estimates({{0, 1}});
        scale.set_estimate(22.627417f);
        if (pos_table) pos_table->set_estimates({{0, 512}, {0, 1024}});
        if (types) types->set_estimates({{0, 128}, {0, 1}});
        if (type_table) type_table->set_estimates({{0, 512}, {0, 2}});
        out.set_estimates({{0, 512}, {0, 128}, {0, 1}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        if (get_target().has_gpu_feature()) {
            schedule_embedding_gpu({out, token, position, type, pe == PE::Learned, token_types, d, t, b},
                                   rec.get("gpu_threads", gpu_threads));
            return;
        }
        schedule_embedding_cpu({out, token, position, type, pe == PE::Learned, token_types, d, t, b},
                               {rec.get("tokens_per_task", tokens_per_task)}, get_target());
    }

private:
    Var d{"d"}, t{"t"}, b{"b"};
    Func token{"token"}, position{"position"}, type{"type"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Embedding, embedding)
