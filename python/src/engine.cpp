// halformer.Engine (halformer/engine.h): many requests at once over one
// Model, batched, joined and answered by the engine's worker threads.
// submit() returns a Request whose result() waits without the GIL; an
// on_token callable runs on a worker thread with the GIL taken.
#include "bindings.h"

#include "halformer/engine.h"
#include "halformer/model.h"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;
using halformer::Engine;
using halformer::EngineOptions;
using halformer::EngineRequest;
using halformer::EngineResult;
using halformer::GenerateOptions;
using halformer::Hypothesis;
using halformer::Model;
using halformer::Sequence;

namespace halformer_py {
namespace {

// One submitted request: what the engine's on_done filled in.
struct Request {
    Engine *engine = nullptr;
    Engine::Id id = 0;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    EngineResult r;

    // Its hypotheses, once done (None: `timeout` seconds passed first).
    // halformer.Error when it failed; an aborted request returns what it had.
    py::object result(std::optional<double> timeout) {
        {
            py::gil_scoped_release nogil;
            std::unique_lock<std::mutex> lock(mu);
            auto ready = [&] { return done; };
            if (!timeout) {
                cv.wait(lock, ready);
            } else if (!cv.wait_for(lock, std::chrono::duration<double>(*timeout), ready)) {
                return py::none();
            }
        }
        if (!r.error.empty()) throw halformer::Error(r.error);
        return py::cast(r.hyps);
    }
    bool is_done() {
        std::lock_guard<std::mutex> lock(mu);
        return done;
    }
};

// A Python callable kept by worker threads: called and released with the
// GIL taken.
struct Callable {
    std::shared_ptr<py::function> f;
    explicit Callable(py::function fn)
        : f(new py::function(std::move(fn)), [](py::function *p) {
              py::gil_scoped_acquire gil;
              delete p;
          }) {}
    void operator()(int32_t id) const {
        py::gil_scoped_acquire gil;
        try {
            (*f)(id);
        } catch (py::error_already_set &e) {
            e.discard_as_unraisable("halformer.Engine on_token");
        }
    }
};

// Deleting an engine waits for its workers, which may wait for the GIL.
struct DeleteWithoutGil {
    void operator()(Engine *e) const {
        py::gil_scoped_release nogil;
        delete e;
    }
};

}  // namespace

void bind_engine(py::module_ &m) {
    py::class_<Request, std::shared_ptr<Request>>(m, "EngineRequest", "A request submitted to an Engine.")
        .def("result", &Request::result, py::arg("timeout") = py::none(),
             "Its hypotheses (n_best, best first) once answered, waiting without the GIL; None when `timeout` "
             "seconds pass first. halformer.Error when it failed; aborted, what it had.")
        .def("done", &Request::is_done)
        .def_property_readonly("aborted", [](Request &r) {
            std::lock_guard<std::mutex> lock(r.mu);
            return r.r.aborted;
        })
        .def("abort", [](Request &r) {
            py::gil_scoped_release nogil;
            r.engine->abort(r.id);
        }, "Ends it: waiting, at once; running, at its batch's next step.")
        .def_property_readonly("id", [](const Request &r) { return r.id; });

    py::class_<Engine, std::unique_ptr<Engine, DeleteWithoutGil>>(
        m, "Engine",
        "Many requests at once over one Model (halformer/engine.h): each batched with those whose options can "
        "share its batch, joining a running batch at its next step, answered as generate() answers it alone.")
        .def(py::init([](Model &model, int workers, int max_batch, int max_queue, double batch_wait_ms, bool join,
                         double join_fair_ms) {
                 EngineOptions o;
                 o.workers = workers;
                 o.max_batch = max_batch;
                 o.max_queue = max_queue;
                 o.batch_wait_ms = batch_wait_ms;
                 o.join = join;
                 o.join_fair_ms = join_fair_ms;
                 return std::unique_ptr<Engine, DeleteWithoutGil>(new Engine(model, o));
             }),
             py::arg("model"), py::arg("workers") = 1, py::arg("max_batch") = 32, py::arg("max_queue") = 256,
             py::arg("batch_wait_ms") = 0.0, py::arg("join") = true, py::arg("join_fair_ms") = 500.0,
             py::keep_alive<1, 2>())
        .def(
            "submit",
            [](Engine &e, const Sequence &input, const std::optional<GenerateOptions> &options,
               const std::optional<py::function> &on_token, const Sequence &target_prefix, const py::kwargs &kw) {
                auto req = std::make_shared<Request>();
                req->engine = &e;
                EngineRequest r;
                r.input = input;
                r.target_prefix = target_prefix;
                r.options = options_from(options, kw, "submit");
                if (on_token) r.on_token = Callable(*on_token);
                r.on_done = [req](const EngineResult &res) {
                    {
                        std::lock_guard<std::mutex> lock(req->mu);
                        req->r = res;
                        req->done = true;
                    }
                    req->cv.notify_all();
                };
                py::gil_scoped_release nogil;
                req->id = e.add(std::move(r));
                return req;
            },
            py::arg("input"), py::arg("options") = py::none(), py::arg("on_token") = py::none(),
            py::arg("target_prefix") = Sequence{}, py::keep_alive<0, 1>(),  // the request keeps its engine
            "Queues one request (a source or a prompt; options as generate's, or keywords) and returns its "
            "EngineRequest. on_token(id) is called on a worker thread for each token as it is chosen (greedy and "
            "sampled rows). halformer.EngineBusy when the queue is full or the engine stopped.")
        .def(
            "stats",
            [](const Engine &e) {
                const halformer::EngineStats s = e.stats();
                py::dict d;
                d["waiting"] = s.waiting;
                d["running"] = s.running;
                d["batches"] = s.batches;
                d["batched"] = s.batched;
                d["joined"] = s.joined;
                d["splits"] = s.splits;
                return d;
            },
            "Counts: requests waiting, batches running, batches started, requests they started with, requests "
            "that joined, failed batches run alone.")
        .def("step", &Engine::step, py::call_guard<py::gil_scoped_release>(),
             "workers=0: one turn of the engine on this thread (a batch starts when none runs, then one step of "
             "it; callbacks run here). False once nothing waits or runs. A request's result() waits for steps "
             "someone takes.")
        .def("stop", &Engine::stop, py::call_guard<py::gil_scoped_release>(),
             "Takes no more requests; returns once every accepted one is answered (workers=0: by stepping).");
}

}  // namespace halformer_py
