// embedding_blocks: token lookup from a table kept in a GGUF file's blocks
// (no float32 copy of the table), × scale; positions are not added (the
// decoders whose files come so rotate queries and keys instead).
//   out[b, t, :] = dequant(blocks[tokens[b, t], :]) · scale
//
//   tokens    [B, T] int32         Halide (t, b)
//   blocks    [V, D/32 · bb] uint8 Halide (i, v)   each row D / 32 blocks of bb bytes, by format:
//     q8_0  bb = 34: fp16 d, 32 int8 codes c          value d · c
//     q4_0  bb = 18: fp16 d, 16 bytes of nibbles      value d · (q − 8)
//     q4_1  bb = 20: fp16 d, fp16 m, 16 bytes         value d · q + m
//               (byte l of a block's nibbles holds q of value l low, of value l + 16 high)
//   start_pos [B] int32            Halide (b): checked to cover every sequence, as
//                                  embedding's (the same signature as hf_embedding_none)
//   scale                          Gemma's √D, or 1
//   out       [B, T, D]            Halide (d, t, b), D = the blocks' row length in values
//
// A token id outside [0, V) is an error returned to the caller; nothing is
// read out of bounds (d past D reads the row's last value).
#include "Halide.h"
#include "common.h"
#include "../schedules/embedding_schedule.h"

#include <stdexcept>

namespace {

using namespace Halide;
using namespace halformer;

class EmbeddingBlocks : public Generator<EmbeddingBlocks> {
public:
    GeneratorParam<std::string> format{"format", "q8_0"};  // q8_0 | q4_0 | q4_1
    GeneratorParam<int> tokens_per_task{"tokens_per_task", 8};
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<int32_t, 2>> tokens{"tokens"};
    Input<Buffer<uint8_t, 2>> blocks{"blocks"};
    Input<Buffer<int32_t, 1>> start_pos{"start_pos"};
    Input<float> scale{"scale"};
    Output<Buffer<float, 3>> out{"out"};

    void generate() {
        /* THE ALGORITHM */
        const int bb = block_bytes();
        Expr V = blocks.dim(1).extent(), D = blocks.dim(0).extent() / bb * 32;
        Expr tok = tokens(t, b);
        Expr has_start = b >= start_pos.dim(0).min() && b <= start_pos.dim(0).max();
        token(t, b) = require(tok >= 0 && tok < V, require(has_start, tok, "start_pos has no entry for sequence", b),
                              "token id", tok, "is outside the vocabulary [0,", V, ")");
        Expr v = clamp(token(t, b), 0, V - 1), dc = clamp(d, 0, D - 1);
        Expr at = (dc / 32) * bb, l = dc % 32;
        auto byte = [&](Expr i) { return blocks(at + i, v); };
        auto half = [&](int i) {
            return cast<float>(reinterpret<float16_t>(cast<uint16_t>(byte(i)) | (cast<uint16_t>(byte(i + 1)) << 8)));
        };
        Expr value;
        if (format.value() == "q8_0") {
            value = half(0) * cast<float>(reinterpret<int8_t>(byte(2 + l)));
        } else {
            const int head = format.value() == "q4_1" ? 4 : 2;
            Expr nib = byte(head + l % 16);
            Expr q = cast<float>(select(l < 16, nib & cast<uint8_t>(15), nib >> cast<uint8_t>(4)));
            value = head == 4 ? half(0) * q + half(2) : half(0) * (q - 8.0f);
        }
        out(d, t, b) = value * scale;

        /* ESTIMATES: 1 × 128 tokens of a 32000-piece vocabulary, D = 2048 */
        tokens.set_estimates({{0, 128}, {0, 1}});
        blocks.set_estimates({{0, 2048 / 32 * bb}, {0, 32000}});
        start_pos.set_estimates({{0, 1}});
        scale.set_estimate(1.0f);
        out.set_estimates({{0, 2048}, {0, 128}, {0, 1}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        schedule_embedding_cpu({out, token, Func(), Func(), false, false, d, t, b},
                               {rec.get("tokens_per_task", tokens_per_task)}, get_target());
    }

private:
    Var d{"d"}, t{"t"}, b{"b"};
    Func token{"token"};

    int block_bytes() const {
        if (format.value() == "q8_0") return 34;
        if (format.value() == "q4_0") return 18;
        if (format.value() == "q4_1") return 20;
        throw std::invalid_argument("embedding_blocks: format must be q8_0, q4_0 or q4_1, not " + format.value());
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(EmbeddingBlocks, embedding_blocks)
