// Training's passes over a stack: the embedding and every layer forward
// with each activation the backward pass reads kept (one arena per stack),
// then the backward pass layer by layer in reverse, through the same
// layers (runtime/src/model/layers/) inference runs.
//
// Layout: activations are time-major (row m = t·R + r for R sequences), as
// in forward.cpp, so the attention kernels read Q, K and V as strided views
// of one fused [M, 3·D] projection, and their gradients land in one fused
// [M, 3·D] buffer that the in_proj weight gradient reads at once.
#include "trainer_impl.h"


#include <algorithm>
#include <cmath>
#include <cstring>

namespace halformer {



// ---------------------------------------------------------------- forward

layers::Pass Trainer::Impl::pass(bool train) const {
    layers::Pass p;
    p.train = true;
    p.dropout = train ? opt.dropout : 0.0f;
    p.seed = (int)(uint32_t)(opt.seed * 0x9E3779B97F4A7C15ull >> 32);
    p.step = (int)(uint32_t)micro_steps;
    return p;
}

// The buffers of one layer's pass: its saved activations.
layers::LayerIO Trainer::Impl::layer_io(LayerActs &a, const Shape &s, const float *memory, const Shape *mem,
                                        int tensor) const {
    const int D = cfg.d_model;
    layers::LayerIO io;
    io.T = s.T;
    io.R = s.R;
    io.x_in = a.x_in;
    io.n1 = a.n1, io.n2 = a.n2, io.n3 = a.n3;
    io.q = a.qkv;
    io.kv = a.qkv + D;
    io.kv_stride = 3 * D;
    io.cache_rows = s.R;
    io.kv_len = s.lens;
    io.att = a.att, io.qc = a.qc, io.attc = a.attc, io.kv_mem = a.kv_mem;
    io.y1 = a.y1, io.y2 = a.y2, io.y3 = a.y3;
    io.x1 = a.x1, io.x2 = a.x2, io.x_out = a.x_out;
    io.z1 = a.z1, io.h1 = a.h1;
    if (memory) {
        io.cross.memory = memory;
        io.cross.len = mem->lens;
        io.cross.S = mem->T;
        io.cross.rows = mem->R;
    }
    io.tensor = tensor;
    return io;
}

// Embedding (+ dropout) and every layer of one stack; returns its output
// (after the final norm, if any).
const float *Trainer::Impl::stack_forward(const StackW &w, StackActs &sa, const Shape &s, bool causal,
                                          const float *memory, const Shape *mem, bool train, int tensor) {
    Session &k = mi();
    const layers::Pass p = pass(train);
    const int D = cfg.d_model;
    sa.layers.resize(w.layers.size());
    const size_t per_layer = layer_floats(s, mem);
    const size_t total = per_layer * w.layers.size() + (size_t)s.M * D * 2;
    float *base = sa.arena.need(total);
    sa.embedded = base;
    layers::embed(k, w, s.tokens, s.T, s.R, 0, sa.embedded);
    layers::dropout(k, p, sa.embedded, nullptr, sa.embedded, s.M, D, tensor);
    const float *x = sa.embedded;
    float *ptr = base + (size_t)s.M * D;
    auto io_for = [&](size_t l) {
        LayerActs &a = sa.layers[l];
        a.carve(ptr, s, mem, cfg);
        a.x_in = x;
        return layer_io(a, s, memory, mem, tensor + 10 * (int)(l + 1));
    };
    layers::stack_forward(k, p, w, causal, io_for, [&](size_t l, const layers::LayerIO &) {
        x = sa.layers[l].x_out;
        ptr += per_layer;
    });
    sa.pre_norm = x;
    if (w.final_norm) {
        layers::layer_norm(k, w.final_norm, x, ptr, s.M);
        x = ptr;
    }
    sa.out = x;
    return x;
}

// ---------------------------------------------------------------- backward

// d output of a stack (in dx) → every layer's gradients, the embedding's.
// `dx`/`spare` are [M, D] buffers that the layers ping-pong between.
void Trainer::Impl::stack_backward(const StackW &w, const StackW &g, StackActs &sa, const Shape &s, bool causal,
                                   const float *memory, const Shape *mem, float *dmem, float *dx, float *spare,
                                   int tensor) {
    Session &k = mi();
    const layers::Pass p = pass(true);
    if (w.final_norm) {
        layers::layer_norm_backward(k, w.final_norm, g.final_norm, sa.pre_norm, dx, spare, s.M);
        std::swap(dx, spare);
    }
    const layers::BackwardBuffers b{bw.t1, bw.t2, bw.da, bw.dqkv, bw.dz, bw.dqc, bw.dkv_mem};
    for (size_t l = w.layers.size(); l-- > 0;) {
        const layers::LayerIO io = layer_io(sa.layers[l], s, memory, mem, tensor + 10 * (int)(l + 1));
        layers::layer_backward(k, p, w.layers[l], g.layers[l], io, causal, b, dmem, dx, spare);
    }
    // The embedding sums: dropout, then the scatter into the table.
    layers::dropout(k, p, dx, nullptr, dx, s.M, cfg.d_model, tensor);
    layers::embed_backward(k, w, g, s.tokens, s.T, s.R, dx);
}

}  // namespace halformer
