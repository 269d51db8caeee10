#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "reference.h"
#include "kernels.h"

#include "hf_sample.h"

HF_DECLARE_GPU(hf_sample)
#ifdef HALFORMER_TEST_AUTOSCHEDULED
extern "C" decltype(hf_sample) hf_sample_adams2019, hf_sample_mullapudi2016;
#endif

using ref::Buffer;
using SampleFn = int (*)(halide_buffer_t *, float, int32_t, float, halide_buffer_t *, halide_buffer_t *);

namespace {

const float kInf = std::numeric_limits<float>::infinity();
// A draw (or a top-p cut) whose reference cumulative weight lies within
// ref::kSampleBorder of its target is not judged: float sums may fall on
// either side of it. The tests count these and require them to be rare.
constexpr double kBorder = ref::kSampleBorder;
using Settings = ref::SampleSettings;
using RefRow = ref::SampleRow;

// Fewer, smaller cases (the same code paths) under an emulated CPU and on
// OpenCL: in CI that is PoCL, the CPU's OpenCL driver, which takes a row's
// block of 256 work-items through each of its ~100 barriers in turn
// (FrequenciesMatchProbabilities' 20,000 rows took 183 s there, its 5,000
// rows 44 s).
bool light() { return emulated_cpu() || test_device() == TestDevice::OpenCL; }

std::string describe(const Settings &s) {
    std::ostringstream o;
    o << "T=" << s.temperature << " top_k=" << s.top_k << " top_p=" << s.top_p;
    return o.str();
}

std::vector<float> row_of(const Buffer<float> &b, int r) {
    std::vector<float> out(b.dim(0).extent());
    for (int v = 0; v < (int)out.size(); v++) out[v] = b(v, r);
    return out;
}

struct Tally {
    int checked = 0, skipped = 0;
};

// Draws on a decision's edge are rare, but not so rare on dense rows (at
// V = 37000 and T = 1.3 the cumulative weights step by ~4e-4 of the total,
// so ~5% of the draws land within 1e-5 of one): at most 1 in 10.
void expect_few_skipped(const Tally &t) {
    EXPECT_LE(t.skipped * 10, t.checked) << t.skipped << " of " << t.checked << " draws on a decision's edge";
}

// Runs the kernel on `logits` once per set of draws and checks every row's
// id against the reference.
void check_draws(const Kernel<SampleFn> &fn, Buffer<float> logits, const Settings &s,
                 const std::vector<std::vector<float>> &draws, Tally &tally, const std::string &what) {
    const int rows = logits.dim(1).extent();
    std::vector<RefRow> refs;
    for (int r = 0; r < rows; r++) refs.emplace_back(row_of(logits, r), s);
    Buffer<float> u(rows);
    Buffer<int32_t> ids(rows);
    for (const auto &d : draws) {
        for (int r = 0; r < rows; r++) u(r) = d[r];
        ids.fill(-7);
        HF_CALL(fn(logits, s.temperature, s.top_k, s.top_p, u, ids));
        for (int r = 0; r < rows; r++) {
            RefRow::Draw want = refs[r].draw(u(r));
            if (want.borderline) {
                tally.skipped++;
                continue;
            }
            tally.checked++;
            EXPECT_EQ(ids(r), want.id) << what << " " << describe(s) << " row " << r << " u=" << u(r) << "; kernel's "
                                       << refs[r].where(ids(r), u(r)) << "; reference's " << refs[r].where(want.id, u(r));
        }
    }
}

std::vector<std::vector<float>> random_draws(int sets, int rows, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(0.0f, 1.0f);
    std::vector<std::vector<float>> out(sets, std::vector<float>(rows));
    for (auto &s : out)
        for (float &x : s) x = std::min(dist(rng), std::nextafter(1.0f, 0.0f));
    // u = 0: the best candidate. (u just below 1 lands within 1e-5 of the
    // total whenever the last candidates weigh little: EdgeShapesAndArguments
    // checks it against the kernel's own last candidate instead.)
    out.push_back(std::vector<float>(rows, 0.0f));
    return out;
}

// Logits N(0, sd) (a trained model's shape), rows × V.
Buffer<float> normal_logits(int V, int rows, uint32_t seed, float sd) {
    Buffer<float> b(V, rows);
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, sd);
    b.for_each_value([&](float &x) { x = dist(rng); });
    return b;
}

std::vector<int32_t> run(const Kernel<SampleFn> &fn, Buffer<float> logits, const Settings &s,
                         const std::vector<float> &u_values) {
    const int rows = logits.dim(1).extent();
    Buffer<float> u(rows);
    Buffer<int32_t> ids(rows);
    for (int r = 0; r < rows; r++) u(r) = u_values[r % u_values.size()];
    ids.fill(-7);
    int rc = fn(logits, s.temperature, s.top_k, s.top_p, u, ids);
    EXPECT_EQ(rc, 0) << halformer::last_kernel_error();
    return std::vector<int32_t>(ids.data(), ids.data() + rows);
}

int argmax_lowest(const Buffer<float> &b, int r) {
    int best = 0;
    for (int v = 1; v < b.dim(0).extent(); v++)
        if (b(v, r) > b(best, r)) best = v;
    return best;
}

}  // namespace

class SampleTest : public OpTest<SampleFn> {};

// Random rows against the reference at many draws: 37 rows of 1000, 8 rows
// of 37000 (a vocabulary), 1 row of 37000, 37 of 37000; temperature, top-k
// and top-p alone and together.
TEST_P(SampleTest, MatchesTheReference) {
    const std::vector<Settings> settings{
        {1.0f, 0, 1.0f}, {0.7f, 50, 1.0f}, {1.3f, 0, 0.9f}, {0.8f, 40, 0.95f}, {2.0f, 7, 0.3f}, {0.5f, 1000, 0.99f}};
    struct Shape {
        int V, rows, sets;
    };
    Tally tally;
    uint32_t seed = 100;
    const std::vector<Shape> shapes = light()
                                          ? std::vector<Shape>{{1000, 37, 3}, {37000, 2, 2}}
                                          : std::vector<Shape>{{1000, 37, 12}, {37000, 8, 3}, {37000, 1, 6}, {37000, 37, 1}};
    for (const Shape &sh : shapes) {
        for (const Settings &s : settings) {
            Buffer<float> uniform = ref::random_buffer({sh.V, sh.rows}, seed++, -10, 10);
            check_draws(GetParam().fn, uniform, s, random_draws(sh.sets, sh.rows, seed++), tally,
                        "uniform V=" + std::to_string(sh.V) + " rows=" + std::to_string(sh.rows));
            Buffer<float> normal = normal_logits(sh.V, sh.rows, seed++, 3.0f);
            check_draws(GetParam().fn, normal, s, random_draws(sh.sets, sh.rows, seed++), tally,
                        "normal V=" + std::to_string(sh.V) + " rows=" + std::to_string(sh.rows));
        }
    }
    std::printf("%d draws checked, %d within %.0e of a decision skipped\n", tally.checked, tally.skipped, kBorder);
    EXPECT_GT(tally.checked, light() ? 1000 : 4000);
    expect_few_skipped(tally);
}

// top_k = 1, a tiny top_p and a temperature near 0 all give the argmax (with
// distinct logits) at every draw; so do temperatures 0 and −1 (greedy).
// (1e-9: logits near 10 lie at least an ulp, ~1e-6, apart, so every
// weight but the max's is exp(−1000) = 0.)
TEST_P(SampleTest, GreedyLimitsGiveTheArgmax) {
    Buffer<float> logits = ref::random_buffer({emulated_cpu() ? 3000 : 37000, 5}, 7, -10, 10);
    const std::vector<float> draws{0.0f, 0.3f, 0.77f, 0.999f, std::nextafter(1.0f, 0.0f)};
    for (const Settings &s : std::vector<Settings>{
             {1.0f, 1, 1.0f}, {1.0f, 0, 1e-6f}, {1e-9f, 0, 1.0f}, {0.0f, 0, 1.0f}, {-1.0f, 0, 1.0f}, {1.0f, 1, 1e-6f}}) {
        for (float u : draws) {
            auto ids = run(GetParam().fn, logits, s, {u});
            for (int r = 0; r < 5; r++) EXPECT_EQ(ids[r], argmax_lowest(logits, r)) << describe(s) << " u=" << u;
        }
    }
}

// Equal logits: candidates best first, equal values in increasing id. Tied
// maxima with top_k = 1: the draw spreads over them (the lowest at u = 0);
// a top-k cut inside a group of equal values keeps the whole group.
TEST_P(SampleTest, Ties) {
    const int V = 2049, rows = 4;
    Buffer<float> ties(V, rows);
    for (int v = 0; v < V; v++) {
        ties(v, 0) = (float)(v % 7);          // 7 values, ~293 ids each
        ties(v, 1) = 1.5f;                    // all equal
        ties(v, 2) = v % 500 == 3 ? 2.0f : (float)(v % 2);  // 5 tied maxima at 3, 503, ...
        ties(v, 3) = v < 1000 ? -0.0f : 0.0f;  // −0 and +0 are one value
    }
    Tally tally;
    for (const Settings &s : std::vector<Settings>{{1.0f, 0, 1.0f}, {1.0f, 1, 1.0f}, {0.5f, 3, 1.0f}, {1.0f, 300, 1.0f},
                                                   {1.0f, 0, 0.5f}, {2.0f, 0, 0.2f}, {1.0f, 294, 0.9f}}) {
        check_draws(GetParam().fn, ties, s, random_draws(40, rows, 11), tally, "ties");
    }
    expect_few_skipped(tally);
    // Row 2, top_k = 1: the 5 maxima (ids 3, 503, 1003, 1503, 2003), by u.
    Buffer<float> one = ties.sliced(1, 2).embedded(1, 0);
    for (int j = 0; j < 5; j++) {
        auto ids = run(GetParam().fn, one, {1.0f, 1, 1.0f}, {(j + 0.5f) / 5});
        EXPECT_EQ(ids[0], 3 + 500 * j);
    }
    // Row 1: all equal, top_k = 1: u = 0 → 0, u just below 1 → the last id.
    Buffer<float> flat = ties.sliced(1, 1).embedded(1, 0);
    EXPECT_EQ(run(GetParam().fn, flat, {1.0f, 1, 1.0f}, {0.0f})[0], 0);
    EXPECT_EQ(run(GetParam().fn, flat, {1.0f, 1, 1.0f}, {std::nextafter(1.0f, 0.0f)})[0], V - 1);
}

// −inf and NaN: weight 0, never drawn; a row with nothing above −inf (all
// −inf, all NaN, or both) gives id 0; +inf logits share the whole weight.
TEST_P(SampleTest, InfinitiesAndNaN) {
    const float nan = std::nanf("");
    const int V = 3001, rows = 8;
    Buffer<float> b(V, rows);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-5, 5);
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < V; v++) b(v, r) = dist(rng);
    for (int v = 0; v < V; v++) {
        b(v, 0) = -kInf;                                // all −inf
        b(v, 1) = nan;                                  // all NaN
        b(v, 2) = v % 2 ? nan : -kInf;                  // both
        if (v != 1234) b(v, 3) = v % 3 ? -kInf : nan;   // one finite logit
        if (v % 3 == 0) b(v, 4) = nan;                  // NaN among finite ones
        if (v % 2 == 0) b(v, 5) = -kInf;                // −inf among finite ones
        if (v % 1000 == 7) b(v, 6) = kInf;              // +inf ×3: ids 7, 1007, 2007
        if (v > 2) b(v, 7) = -kInf;                     // 3 finite, top_k 10 reaches −inf
    }
    Tally tally;
    for (const Settings &s : std::vector<Settings>{{1.0f, 0, 1.0f}, {0.7f, 10, 1.0f}, {1.0f, 0, 0.8f}, {1.5f, 10, 0.9f}}) {
        check_draws(GetParam().fn, b, s, random_draws(emulated_cpu() ? 5 : 40, rows, 3), tally, "inf/nan");
        for (float u : {0.0f, 0.5f, std::nextafter(1.0f, 0.0f)}) {
            auto ids = run(GetParam().fn, b, s, {u});
            EXPECT_EQ(ids[0], 0) << describe(s);
            EXPECT_EQ(ids[1], 0) << describe(s);
            EXPECT_EQ(ids[2], 0) << describe(s);
            EXPECT_EQ(ids[3], 1234) << describe(s);
            EXPECT_NE(ids[4] % 3, 0) << describe(s) << ": a NaN was drawn";
            EXPECT_NE(ids[5] % 2, 0) << describe(s) << ": a −inf was drawn";
            EXPECT_EQ(ids[6] % 1000, 7) << describe(s) << ": not a +inf";
            EXPECT_LE(ids[7], 2) << describe(s) << ": a −inf was drawn";
        }
    }
    expect_few_skipped(tally);
}

// V = 1 (always 0), top_k >= V (no cut: the same ids as top_k = 0), odd
// sizes, and u outside [0, 1) (clamped).
TEST_P(SampleTest, EdgeShapesAndArguments) {
    Buffer<float> single(1, 3);
    single(0, 0) = 2.0f;
    single(0, 1) = -kInf;
    single(0, 2) = std::nanf("");
    for (float u : {0.0f, 0.5f, 0.9999f}) {
        auto ids = run(GetParam().fn, single, {1.0f, 0, 1.0f}, {u});
        for (int r = 0; r < 3; r++) EXPECT_EQ(ids[r], 0);
        ids = run(GetParam().fn, single, {0.5f, 5, 0.1f}, {u});
        for (int r = 0; r < 3; r++) EXPECT_EQ(ids[r], 0);
    }
    for (int V : {2, 17, 255, 256, 257, 37000}) {
        Buffer<float> logits = ref::random_buffer({V, 6}, 40 + V, -10, 10);
        std::vector<float> draws{0.0f, 0.1f, 0.5f, 0.93f, std::nextafter(1.0f, 0.0f)};
        for (float p : {1.0f, 0.8f}) {
            for (float u : draws) {
                auto none = run(GetParam().fn, logits, {1.0f, 0, p}, {u});
                EXPECT_EQ(run(GetParam().fn, logits, {1.0f, V, p}, {u}), none) << "V=" << V;
                EXPECT_EQ(run(GetParam().fn, logits, {1.0f, V + 5, p}, {u}), none) << "V=" << V;
                EXPECT_EQ(run(GetParam().fn, logits, {1.0f, -3, p}, {u}), none) << "V=" << V;
            }
        }
        Tally tally;
        check_draws(GetParam().fn, logits, {0.9f, 0, 1.0f}, random_draws(10, 6, V), tally, "V=" + std::to_string(V));
        // (at most 100 candidates: a top-p cut among 18500 is within 1e-5 of
        // a group's edge in half the rows)
        check_draws(GetParam().fn, logits, {0.9f, std::min(V / 2 + 1, 100), 0.7f}, random_draws(10, 6, V), tally,
                    "V=" + std::to_string(V));
        expect_few_skipped(tally);
    }
    // u out of range: below 0 and NaN act as 0, 1 and above as just below 1.
    Buffer<float> logits = ref::random_buffer({500, 1}, 9, -2, 2);
    const Settings s{1.0f, 0, 1.0f};
    const int first = run(GetParam().fn, logits, s, {0.0f})[0];
    const int last = run(GetParam().fn, logits, s, {std::nextafter(1.0f, 0.0f)})[0];
    EXPECT_EQ(run(GetParam().fn, logits, s, {-0.5f})[0], first);
    EXPECT_EQ(run(GetParam().fn, logits, s, {std::nanf("")})[0], first);
    EXPECT_EQ(run(GetParam().fn, logits, s, {1.0f})[0], last);
    EXPECT_EQ(run(GetParam().fn, logits, s, {7.0f})[0], last);
}

// A view into a larger buffer: rows V + 13 floats apart, starting 5 floats
// in, and every other row (dim 1 strided); the ids count from the view's
// first logit.
TEST_P(SampleTest, StridedView) {
    const int V = 1500, rows = 9, pitch = V + 13;
    Buffer<float> big = ref::random_buffer({pitch, 2 * rows}, 21, -6, 6);
    halide_dimension_t shape[2] = {{0, V, 1}, {0, rows, 2 * pitch}};
    Buffer<float> view(big.data() + 5, 2, shape);
    Buffer<float> copy(V, rows);
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < V; v++) copy(v, r) = big(5 + v, 2 * r);
    for (const Settings &s : std::vector<Settings>{{1.0f, 0, 1.0f}, {0.8f, 30, 0.9f}}) {
        auto draws = random_draws(8, rows, 77);
        for (const auto &d : draws) EXPECT_EQ(run(GetParam().fn, view, s, d), run(GetParam().fn, copy, s, d));
        Tally tally;
        check_draws(GetParam().fn, view, s, draws, tally, "view");
        expect_few_skipped(tally);
    }
}

// The frequencies of the ids over many draws match the probabilities: 20000
// rows of the same 10 logits, one random u each (a chi-square test), and the
// same on a regular grid of u (each id's count within 2 of N·p: one grid
// point per boundary may fall either side of it in float).
TEST_P(SampleTest, FrequenciesMatchProbabilities) {
    // (Light: 2,500 rows, where the least likely id, p = 0.0023, still
    // expects 5.8 draws, the chi-square test's usual minimum of 5.)
    const int V = 10, N = light() ? 2500 : 20000;
    const float base[V] = {1.0f, 0.5f, 2.0f, -1.0f, 0.0f, 1.5f, -kInf, 0.25f, 1.0f, -3.0f};
    Buffer<float> logits(V, N);
    for (int r = 0; r < N; r++)
        for (int v = 0; v < V; v++) logits(v, r) = base[v];
    for (const Settings &s : std::vector<Settings>{{1.0f, 0, 1.0f}, {0.7f, 5, 1.0f}, {1.2f, 0, 0.8f}}) {
        // The probabilities, from the reference's draws on a fine grid.
        std::vector<float> one(base, base + V);
        RefRow ref(one, s);
        std::vector<double> prob(V, 0.0);
        const int G = emulated_cpu() ? 1 << 16 : 1 << 20;
        for (int g = 0; g < G; g++) prob[ref.draw((g + 0.5f) / G).id] += 1.0 / G;
        for (bool grid : {false, true}) {
            std::vector<float> u(N);
            std::mt19937 rng(99);
            std::uniform_real_distribution<float> dist(0.0f, 1.0f);
            for (int r = 0; r < N; r++) u[r] = grid ? (r + 0.5f) / N : dist(rng);
            auto ids = run(GetParam().fn, logits, s, u);
            std::vector<int> count(V, 0);
            for (int id : ids) {
                ASSERT_GE(id, 0);
                ASSERT_LT(id, V);
                count[id]++;
            }
            double chi2 = 0;
            int dof = -1;
            for (int v = 0; v < V; v++) {
                const double expect = N * prob[v];
                if (expect == 0) {
                    EXPECT_EQ(count[v], 0) << describe(s) << ": id " << v << " has probability 0";
                    continue;
                }
                chi2 += (count[v] - expect) * (count[v] - expect) / expect;
                dof++;
                if (grid) EXPECT_NEAR(count[v], expect, 2.0) << describe(s) << " id " << v;
            }
            // 99.9th percentile of chi-square with up to 8 degrees of freedom: 26.1.
            if (!grid) EXPECT_LT(chi2, 26.1) << describe(s) << " (" << dof << " degrees of freedom)";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(All, SampleTest,
                         testing::ValuesIn(on_device(std::vector<Impl<SampleFn>>{
                             {"hf_sample", HF_KERNEL(hf_sample)},
#ifdef HALFORMER_TEST_AUTOSCHEDULED
                             {"hf_sample_adams2019", HF_CPU_ONLY(hf_sample_adams2019)},
                             {"hf_sample_mullapudi2016", HF_CPU_ONLY(hf_sample_mullapudi2016)},
#endif
                         })),
                         impl_name<SampleFn>);
