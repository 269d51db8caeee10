// Token embeddings scaled by √d_model (section 3.4) plus the positions
// (sinusoidal interleaved or in halves, or a learned table) and, for BERT,
// the token types (all type 0: one segment) and a LayerNorm; and the
// backward: the gradient rows scattered into the table (and positions).
#include "layers.h"

#include "hf_embedding.h"
#include "hf_embedding_concat.h"
#include "hf_embedding_learned.h"
#include "hf_embedding_learned_types.h"
#include "hf_embedding_none.h"

HF_DEVICE_KERNELS(hf_embedding)
HF_DEVICE_KERNELS(hf_embedding_concat)
HF_DEVICE_KERNELS(hf_embedding_learned)
HF_DEVICE_KERNELS(hf_embedding_learned_types)
HF_DEVICE_KERNELS(hf_embedding_none)
#ifndef HALFORMER_NO_LOWP
#include "hf_embedding_none_q4_0.h"
#include "hf_embedding_none_q4_1.h"
#include "hf_embedding_none_q8_0.h"
#endif
#ifdef HALFORMER_HAS_TRAINING
#include "hf_embedding_backward.h"
#include "hf_embedding_learned_backward.h"
HF_DEVICE_KERNELS(hf_embedding_backward)
HF_DEVICE_KERNELS(hf_embedding_learned_backward)
#endif

#include <algorithm>
#include <cmath>

namespace halformer {
namespace layers {
namespace {

// The lookup from the file's blocks (int8 precision: Session::embed_rows),
// where the model keeps them; false where it runs the float32 table.
bool embed_from_blocks(Kernels &k, const StackW &s, View &tok, View &vstart, float scale, View &out) {
#ifdef HALFORMER_NO_LOWP
    (void)k, (void)s, (void)tok, (void)vstart, (void)scale, (void)out;
    return false;
#else
    const int D = k.desc.d_model;
    const EmbedRows *e = k.embed_rows(s.embed, s.vocab, D);
    if (!e) return false;
    View vb(e->bytes.data(), {{D / 32 * e->block_bytes, 1}, {s.vocab, D / 32 * e->block_bytes}},
            halide_type_t(halide_type_uint, 8));
    switch (e->format) {
    case EmbedRows::Q8_0:
        k.run("embedding", [&] { return hf_embedding_none_q8_0(tok.get(), vb.get(), vstart.get(), scale, out.get()); });
        break;
    case EmbedRows::Q4_0:
        k.run("embedding", [&] { return hf_embedding_none_q4_0(tok.get(), vb.get(), vstart.get(), scale, out.get()); });
        break;
    case EmbedRows::Q4_1:
        k.run("embedding", [&] { return hf_embedding_none_q4_1(tok.get(), vb.get(), vstart.get(), scale, out.get()); });
        break;
    }
    return true;
#endif
}

}  // namespace

void embed(Kernels &k, const StackW &s, const int32_t *tokens, int T, int R, int start, float *x,
           const int32_t *row_start) {
    const Description &c = k.desc;
    const int D = c.d_model;
    // The kernel reads tokens as (t, b) with unit stride in t.
    std::vector<int32_t> by_row((size_t)T * R);
    for (int t = 0; t < T; t++) {
        for (int r = 0; r < R; r++) by_row[(size_t)r * T + t] = tokens[(size_t)t * R + r];
    }
    std::vector<int32_t> starts = row_start ? std::vector<int32_t>(row_start, row_start + R) : std::vector<int32_t>(R, start);
    View tok(by_row.data(), {{T, 1}, {R, T}}, true), table(s.embed, {{D, 1}, {s.vocab, D}});
    View vstart(starts.data(), {{R, 1}}, true);
    View out(x, {{D, 1}, {T, R * D}, {R, D}});
    const float scale = c.embedding_scale;
    const bool lookup = (c.position == Positional::Relative || c.position == Positional::Rotary) && !s.types;
    const bool from_blocks = lookup && embed_from_blocks(k, s, tok, vstart, scale, out);
    // (A table the file's blocks stood in for gets its float32 values now.)
    if (!from_blocks && k.w->source) k.w->source->materialize(s.embed);
    if (!from_blocks) switch (c.position) {
    case Positional::Relative:  // (T5: positions enter the attention as a bias)
    case Positional::Rotary:    // (Llama: queries and keys are rotated by position)
        k.run("embedding",
              [&] { return HF_PICK(k.device(), hf_embedding_none)(tok.get(), table.get(), vstart.get(), scale, out.get()); });
        break;
    case Positional::Sinusoidal:
        k.run("embedding", [&] { return HF_PICK(k.device(), hf_embedding)(tok.get(), table.get(), vstart.get(), scale, out.get()); });
        break;
    case Positional::SinusoidalConcat:
        k.run("embedding",
              [&] { return HF_PICK(k.device(), hf_embedding_concat)(tok.get(), table.get(), vstart.get(), scale, out.get()); });
        break;
    case Positional::Learned: {
        View pos(s.pos, {{D, 1}, {c.max_positions, D}});
        if (s.types) {
            std::vector<int32_t> types((size_t)T * R, 0);
            View vt(types.data(), {{T, 1}, {R, T}}, true), tt(s.types, {{D, 1}, {c.token_types, D}});
            k.run("embedding", [&] {
                return HF_PICK(k.device(), hf_embedding_learned_types)(tok.get(), table.get(), vstart.get(), scale, pos.get(),
                                                                       vt.get(), tt.get(), out.get());
            });
            break;
        }
        k.run("embedding", [&] {
            return HF_PICK(k.device(), hf_embedding_learned)(tok.get(), table.get(), vstart.get(), scale, pos.get(), out.get());
        });
        break;
    }
    }
    if (s.types && c.position != Positional::Learned) throw Error("internal: token types need learned positions");
    if (s.embed_norm) {
        // x (time-major rows, the kernel wrote them by sequence) normalized.
        float *normed = k.y.need((size_t)T * R * D);
        layer_norm(k, s.embed_norm, x, normed, T * R);
        k.dev->copy(x, normed, (size_t)T * R * D * sizeof(float));
    }
}

#ifdef HALFORMER_HAS_TRAINING

void embed_backward(Kernels &k, const StackW &w, const StackW &g, const int32_t *tokens, int T, int R,
                    const float *dx) {
    const Description &c = k.desc;
    const int D = c.d_model;
    // Each token as a slot among the batch's distinct ids (the kernel sums
    // per slot, then adds each slot's sum to its row once).
    std::vector<int32_t> rows(tokens, tokens + (size_t)T * R);
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    std::vector<int32_t> slots((size_t)T * R);
    for (int t = 0; t < T; t++) {
        for (int r = 0; r < R; r++) {
            const int32_t id = tokens[(size_t)t * R + r];
            slots[(size_t)r * T + t] = (int32_t)(std::lower_bound(rows.begin(), rows.end(), id) - rows.begin());
        }
    }
    View tok(slots.data(), {{T, 1}, {R, T}}, true), vrows(rows.data(), {{(int)rows.size(), 1}}, true);
    View vd(dx, {{D, 1}, {T, R * D}, {R, D}}), tab(g.embed, {{D, 1}, {w.vocab, D}});
    const float scale = c.embedding_scale;
    if (c.position == Positional::Learned) {
        View pos(g.pos, {{D, 1}, {c.max_positions, D}});
        k.run("embedding_backward", [&] {
            return HF_PICK(k.device(), hf_embedding_learned_backward)(tok.get(), vrows.get(), vd.get(), scale, 0,
                                                                      tab.get(), pos.get());
        });
    } else {
        k.run("embedding_backward", [&] {
            return HF_PICK(k.device(), hf_embedding_backward)(tok.get(), vrows.get(), vd.get(), scale, 0, tab.get());
        });
    }
}

#endif  // HALFORMER_HAS_TRAINING

}  // namespace layers
}  // namespace halformer
