// The fuzz targets parse files; no layer runs in them. The families'
// builders (runtime/src/model/hf/families/) name the layer ops they
// compose, and config.json's reader describes a family (its builder
// included) to check it, so the ops must link: here each one, in the parsers'
// build only, refuses to run.
#include "../../runtime/src/model/layers/layers.h"

namespace halformer {
namespace layers {
namespace {

[[noreturn]] void no_layers(const char *op) {
    throw Error(std::string("the fuzz targets run no layer (") + op + ")");
}

}  // namespace

void layer_norm(Kernels &, const NormW &, const float *, float *, int, int) { no_layers("layer_norm"); }
void norm_add(Kernels &, const NormW &, const float *, const float *, float *, int) { no_layers("norm_add"); }
void add_layer_norm(Kernels &, const NormW &, const float *, const float *, float *, int) {
    no_layers("add_layer_norm");
}
void self_projections(Kernels &, const Pass &, const AttnW &, const float *, LayerIO &) {
    no_layers("self_projections");
}
void self_attention(Kernels &, const Pass &, bool, LayerIO &) { no_layers("self_attention"); }
QK project_qkv(Kernels &, const Pass &, const AttnW &, const float *, LayerIO &) { no_layers("project_qkv"); }
QK qk_norm(Kernels &, const NormW &, const NormW &, const QK &, bool, LayerIO &) { no_layers("qk_norm"); }
void rotate_qk(Kernels &, const QK &, LayerIO &) { no_layers("rotate_qk"); }
void attention_output(Kernels &, const Pass &, const AttnW &, const LayerIO &, const float *, float *) {
    no_layers("attention_output");
}
void cross_attention(Kernels &, const Pass &, const AttnW &, const float *, LayerIO &) {
    no_layers("cross_attention");
}
void cross_attention_output(Kernels &, const Pass &, const AttnW &, const LayerIO &, const float *, float *) {
    no_layers("cross_attention_output");
}
void feed_forward(Kernels &, const Pass &, const LayerW &, const float *, const float *, LayerIO &, float *) {
    no_layers("feed_forward");
}
void moe(Kernels &, const Pass &, const LayerW &, const float *, const float *, LayerIO &, float *) { no_layers("moe"); }

}  // namespace layers
}  // namespace halformer
