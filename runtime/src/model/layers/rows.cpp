// Rows by index, both ways: gather (rows picked into a dense block) and
// scatter (a dense block's rows written at their own places: the paged KV
// cache's write). Index lists are host arrays.
#include "layers.h"

#include "hf_gather_rows.h"
#include "hf_scatter_rows.h"

HF_DEVICE_KERNELS(hf_gather_rows)
HF_DEVICE_KERNELS(hf_scatter_rows)

namespace halformer {
namespace layers {

void gather_rows(Kernels &k, const float *src, int W, int rows_in, const int32_t *idx, int n, float *out) {
    View from(src, {{W, 1}, {rows_in, W}, {1, rows_in * W}}), vi(idx, {{n, 1}}, true);
    View to(out, {{W, 1}, {n, W}, {1, n * W}});
    k.run("gather", [&] { return HF_PICK(k.device(), hf_gather_rows)(from.get(), vi.get(), to.get()); });
}

void scatter_rows(Kernels &k, const float *src, int W, int n, const int32_t *idx, float *out, int rows_out,
                  int stride) {
    View from(src, {{W, 1}, {n, stride ? stride : W}}), vi(idx, {{n, 1}}, true), to(out, {{W, 1}, {rows_out, W}});
    k.run("scatter", [&] { return HF_PICK(k.device(), hf_scatter_rows)(from.get(), vi.get(), to.get()); });
}

}  // namespace layers
}  // namespace halformer
