// kiln._kiln: the C++ half of the Python package (client/python/kiln/).
//
// A thin layer over the C++ client: torch.Tensors go in and out without a
// copy (a TensorView of each input's memory; outputs are torch.empty
// tensors the kernel writes), guards are checked in C++, and the GIL is
// released for the whole Run. Errors become the package's exceptions, each
// carrying the client's message.
#include <ATen/ATen.h>
#include <google/protobuf/util/json_util.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "client/client.h"
#include "client/compiled_graph.h"
#include "client/python/torch_loops.h"
#include "client/runtime/linalg_errors.h"
#include "client/runtime/runtime.h"
#include "client/tensor.h"
#include "codegen/ops/op_table.h"
#include "proto/graph_file.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// The package's exception types (defined in kiln/__init__.py).
PyObject* kiln_error = nullptr;            // kiln.KilnError(RuntimeError): the base
PyObject* unsupported_op_error = nullptr;  // Unimplemented: an op or dtype Kiln lacks
PyObject* guard_error = nullptr;           // FailedPrecondition: inputs the guards refuse
PyObject* daemon_unavailable = nullptr;    // Unavailable, or unanswered: no kilnd to ask
PyObject* linalg_error = nullptr;          // torch.linalg.LinAlgError (runtime/linalg_errors.h)

[[noreturn]] void Raise(const absl::Status& status) {
  PyObject* type = kiln_error;
  switch (status.code()) {
    case absl::StatusCode::kUnimplemented:
      type = unsupported_op_error;
      break;
    case absl::StatusCode::kFailedPrecondition:
      if (IsGuardMiss(status)) type = guard_error;
      if (const char* eager = EagerErrorType(status)) {  // a singular matrix, as eager's
        type = std::string(eager) == "LinAlgError" ? linalg_error : PyExc_RuntimeError;
      }
      break;
    case absl::StatusCode::kUnavailable:
      type = daemon_unavailable;
      break;
    case absl::StatusCode::kDeadlineExceeded:
      if (IsUnanswered(status)) type = daemon_unavailable;
      break;
    case absl::StatusCode::kInvalidArgument:
      type = PyExc_ValueError;
      break;
    case absl::StatusCode::kOutOfRange:  // an index out of its dim, as eager's IndexError
      type = PyExc_IndexError;
      break;
    default:
      break;
  }
  PyErr_SetString(type, std::string(status.message()).c_str());
  throw py::error_already_set();
}

// Python's signal handlers, run from a wait on kilnd with the GIL taken
// for them (client.h InterruptScope): Ctrl-C's leaves KeyboardInterrupt
// pending, and the wait ends.
bool PythonSignalled() {
  py::gil_scoped_acquire locked;
  return PyErr_CheckSignals() != 0;
}

// Raises what a signal handler raised during a wait (the call it cut short
// may even have finished).
void ThrowIfSignalled() {
  if (PyErr_Occurred() != nullptr) throw py::error_already_set();
}

template <typename T>
T ValueOrRaise(absl::StatusOr<T> value) {
  if (!value.ok()) Raise(value.status());
  return *std::move(value);
}

// Kiln's dtypes and torch's, pair by pair.
constexpr std::pair<DType, at::ScalarType> kDTypes[] = {
    {kiln::v1::FLOAT32, at::kFloat},
    {kiln::v1::FLOAT64, at::kDouble},
    {kiln::v1::FLOAT16, at::kHalf},
    {kiln::v1::BFLOAT16, at::kBFloat16},
    {kiln::v1::INT64, at::kLong},
    {kiln::v1::INT32, at::kInt},
    {kiln::v1::BOOL, at::kBool},
    {kiln::v1::INT8, at::kChar},
    {kiln::v1::UINT8, at::kByte},
    {kiln::v1::INT16, at::kShort},
    {kiln::v1::COMPLEX64, at::kComplexFloat},
    {kiln::v1::COMPLEX128, at::kComplexDouble},
};

std::optional<DType> ToKiln(at::ScalarType type) {
  for (const auto& [kiln_type, torch_type] : kDTypes) {
    if (torch_type == type) return kiln_type;
  }
  return std::nullopt;
}

at::ScalarType ToTorch(DType type) {
  for (const auto& [kiln_type, torch_type] : kDTypes) {
    if (kiln_type == type) return torch_type;
  }
  return at::kFloat;  // kDTypes lists every DType an artifact can have
}

std::shared_ptr<Client> OpenClient(const std::string& socket_path, const std::string& cache_dir,
                                   const std::string& daemon_path, bool auto_start) {
  ClientOptions options;
  options.socket_path = socket_path;
  options.cache_dir = cache_dir;
  options.daemon_path = daemon_path;
  options.auto_start = auto_start;
  options.client_name = "kiln-python";
  return std::shared_ptr<Client>(Client::Open(std::move(options)));
}

py::dict ToDict(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) {
    Raise(absl::InternalError("cannot print a message as JSON"));
  }
  return py::module_::import("json").attr("loads")(json);
}

// A serialized kiln.v1.Graph: what the package's tracer builds with
// graph_pb2 (kiln/_graph.py) and kiln.save stores for kiln.load.
kiln::v1::Graph ParseGraph(const py::bytes& graph) {
  kiln::v1::Graph parsed;
  if (!parsed.ParseFromString(std::string(graph))) {
    Raise(absl::InvalidArgumentError("graph: not a Kiln graph (binary kiln.v1.Graph)"));
  }
  return parsed;
}

// One graph, compiled on first use; calls run its kernels.
class PyCompiledGraph {
 public:
  // `writes`: the inputs the function changes in place, by position among
  // Call's arguments; the graph's last outputs are their new values, in
  // order.
  PyCompiledGraph(std::shared_ptr<Client> client, const py::bytes& graph, const std::string& target,
                  const std::string& on_stride_miss, std::vector<size_t> writes)
      : client_(std::move(client)), writes_(std::move(writes)) {
    CompiledGraph::StrideMiss stride_miss;
    if (on_stride_miss == "specialize") {
      stride_miss = CompiledGraph::StrideMiss::kSpecialize;
    } else if (on_stride_miss == "copy") {
      stride_miss = CompiledGraph::StrideMiss::kCopyToTracedLayout;
    } else {
      Raise(absl::InvalidArgumentError(
          absl::StrCat("on_stride_miss is 'specialize' or 'copy', not '", on_stride_miss, "'")));
    }
    kiln::v1::CompileOptions options;
    kiln::v1::Target parsed;
    if (!kiln::v1::Target_Parse(
            "TARGET_" + absl::StrReplaceAll(absl::AsciiStrToUpper(target), {{"-", "_"}}),
            &parsed)) {
      Raise(absl::InvalidArgumentError(
          absl::StrCat("unknown target '", target, "': native, x86-64-v3 or x86-64-v4")));
    }
    options.set_target(parsed);
    compiled_ = std::make_unique<CompiledGraph>(client_.get(), ParseGraph(graph), options);
    compiled_->set_stride_miss(stride_miss);
    if (writes_.size() > static_cast<size_t>(compiled_->graph().outputs_size())) {
      throw py::value_error(absl::StrCat(writes_.size(),
                                         " inputs changed in place, but the graph has ",
                                         compiled_->graph().outputs_size(), " outputs"));
    }
  }
  // Destroying a CompiledGraph may wait on a background compile or send
  // its last traffic counts: not while holding up every Python thread.
  ~PyCompiledGraph() {
    py::gil_scoped_release unlocked;
    compiled_.reset();
  }

  // compiled(*tensors) -> [tensors]: the graph's outputs, less the new
  // values of the inputs changed in place, which are copied into them
  // unless the kernel wrote them there (Signature.output_aliases). With a
  // few inputs and outputs, it allocates no memory but the output tensors.
  py::list Call(const py::args& args) {
    const size_t n = args.size();
    absl::InlinedVector<TensorView, 4> inputs(n);
    std::vector<at::Tensor> resolved;  // values of conjugated or negated views
    for (size_t i = 0; i < n; ++i) {
      PyObject* object = args[i].ptr();
      if (!THPVariable_Check(object)) {
        throw py::type_error(
            absl::StrCat("input ", i, " is a ", Py_TYPE(object)->tp_name, ", not a torch.Tensor"));
      }
      const at::Tensor& tensor = THPVariable_Unpack(object);
      const std::optional<DType> dtype = ToKiln(tensor.scalar_type());
      if (!dtype.has_value() || !tensor.device().is_cpu() || tensor.layout() != at::kStrided) {
        throw py::type_error(
            absl::StrCat("input ", i, " is a ", tensor.toString(),
                         ": Kiln runs dense CPU tensors of float32, float64, "
                         "float16, bfloat16, int64, int32, bool, complex64 or complex128"));
      }
      if (tensor.requires_grad() && at::GradMode::is_enabled()) {
        PyErr_SetString(kiln_error,
                        absl::StrCat("input ", i,
                                     " requires grad: Kiln does not record autograd; call it "
                                     "under torch.no_grad() or torch.inference_mode()")
                            .c_str());
        throw py::error_already_set();
      }
      if (tensor.is_conj() || tensor.is_neg()) {
        // A lazily conjugated (or negated) view: the artifact reads memory,
        // so it gets the values themselves.
        resolved.push_back(tensor.resolve_conj().resolve_neg());
        const at::Tensor& values = resolved.back();
        inputs[i] = TensorView{values.data_ptr(), *dtype, values.sizes(), values.strides()};
        continue;
      }
      inputs[i] = TensorView{tensor.data_ptr(), *dtype, tensor.sizes(), tensor.strides()};
    }
    // The inputs changed in place, taken while the GIL is held.
    std::vector<at::Tensor> targets;
    for (const size_t position : writes_) {
      if (position >= n) {
        throw py::value_error(absl::StrCat("input ", position, " is changed in place, but only ", n,
                                           " inputs were given"));
      }
      targets.push_back(THPVariable_Unpack(args[position].ptr()));
    }
    const int kept = compiled_->graph().outputs_size() - static_cast<int>(writes_.size());
    absl::InlinedVector<at::Tensor, 4> outputs(kept);
    // An output the kernel writes in its input is never allocated (and
    // never copied back).
    absl::InlinedVector<bool, 8> allocated(compiled_->graph().outputs_size(), false);
    std::vector<at::Tensor> written = TakeWritten();
    const absl::Cleanup give_back = [&] { GiveBackWritten(std::move(written)); };
    absl::Status status;
    {
      py::gil_scoped_release unlocked;
      const InterruptScope interruptible(&PythonSignalled);  // a guard miss compiles
      status = compiled_->Run(
          inputs,
          [&](int k, DType dtype, absl::Span<const int64_t> sizes) -> absl::StatusOr<TensorView> {
            const at::IntArrayRef shape(sizes.data(), sizes.size());
            const at::ScalarType type = ToTorch(dtype);
            allocated[k] = true;
            at::Tensor& output = k < kept ? outputs[k] : written[k - kept];
            if (k < kept || !output.defined() || output.sizes() != shape ||
                output.scalar_type() != type) {
              output = at::empty(shape, at::TensorOptions().dtype(type));
            }
            return TensorView{output.data_ptr(), dtype, output.sizes(), output.strides()};
          });
    }
    // A Ctrl-C during the call leaves the inputs as they were.
    ThrowIfSignalled();
    if (!status.ok()) Raise(status);
    if (!targets.empty()) {
      py::gil_scoped_release unlocked;
      const ForkGuard copying;
      const at::AutoGradMode no_grad(false);  // as eager's in-place op left them
      for (size_t j = 0; j < targets.size(); ++j) {
        if (allocated[kept + j]) targets[j].copy_(written[j]);
      }
    }
    py::list result(outputs.size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      result[k] = py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(outputs[k])));
    }
    return result;
  }

  py::dict Prepare() {
    absl::StatusOr<CompiledGraph::PrepareResult> prepared;
    {
      py::gil_scoped_release unlocked;  // errors are raised once it is back
      const InterruptScope interruptible(&PythonSignalled);
      prepared = compiled_->Prepare();
    }
    ThrowIfSignalled();
    const CompiledGraph::PrepareResult result = ValueOrRaise(std::move(prepared));
    py::dict out;
    out["cache_hit"] = result.cache_hit;
    out["local"] = result.local;
    out["fetch_ms"] = result.fetch_ms;
    out["open_ms"] = result.open_ms;
    return out;
  }

  // warmup(entry_json, progress) with a kiln.v1.WarmupGraph as JSON.
  py::dict Warmup(const std::string& entry_json, const py::object& progress) {
    kiln::v1::WarmupGraph entry;
    const absl::Status parsed =
        ParseJsonMessage(entry_json, "warmup entry", "a Kiln warmup plan entry", entry);
    if (!parsed.ok()) Raise(parsed);
    absl::StatusOr<CompiledGraph::WarmupResult> warmed;
    {
      py::gil_scoped_release unlocked;
      CompiledGraph::WarmupProgress report = nullptr;
      if (!progress.is_none()) {
        report = [&](int done, int total, const std::string& name) {
          py::gil_scoped_acquire locked;
          try {
            progress(done, total, name);
          } catch (py::error_already_set& error) {  // a broken callback does not stop the warmup
            error.discard_as_unraisable("kiln warmup progress");
          }
        };
      }
      const InterruptScope interruptible(&PythonSignalled);
      warmed = compiled_->Warmup(entry, report);
    }
    ThrowIfSignalled();
    const CompiledGraph::WarmupResult result = ValueOrRaise(std::move(warmed));
    py::dict out;
    out["buckets"] = result.buckets;
    out["runs"] = result.runs;
    out["entries"] = result.entries;
    out["local"] = result.local;
    out["padded_symbols"] = result.padded_symbols;
    return out;
  }

  // The median of `calls` C++ Runs at `tensors` with outputs the client
  // allocates, in ns: what a Python call's own cost is measured against
  // (tools/bench/python_bench.py).
  double MedianCppRunNs(const py::list& tensors, int calls) {
    std::vector<TensorView> inputs;
    for (const py::handle& object : tensors) {
      const at::Tensor& tensor = THPVariable_Unpack(object.ptr());
      inputs.push_back(TensorView{tensor.data_ptr(), *ToKiln(tensor.scalar_type()), tensor.sizes(),
                                  tensor.strides()});
    }
    std::vector<double> times;
    py::gil_scoped_release unlocked;
    for (int i = 0; i < calls; ++i) {
      const absl::Time start = absl::Now();
      if (!compiled_->Run(inputs).ok()) return -1;
      times.push_back(absl::ToDoubleNanoseconds(absl::Now() - start));
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    return times.empty() ? 0 : times[times.size() / 2];
  }

  py::dict Artifact() const { return ToDict(ValueOrRaise(compiled_->artifact())); }
  void SetSpecializationLimit(size_t limit) { compiled_->set_specialization_limit(limit); }
  void SetGivenSizesOnly(bool on) { compiled_->set_given_sizes_only(on); }

 private:
  // The buffers the new values of inputs changed in place are written to
  // before they are copied into the inputs: kept between calls, a set per
  // call in flight up to kMaxWrittenSets, so that a large one (a key/value
  // cache) is not a fresh allocation, its pages faulted in, at every call.
  static constexpr size_t kMaxWrittenSets = 4;
  std::vector<at::Tensor> TakeWritten() {
    if (writes_.empty()) return {};
    absl::MutexLock lock(&written_mutex_);
    if (written_pool_.empty()) return std::vector<at::Tensor>(writes_.size());
    std::vector<at::Tensor> written = std::move(written_pool_.back());
    written_pool_.pop_back();
    return written;
  }
  void GiveBackWritten(std::vector<at::Tensor> written) {
    if (written.empty()) return;
    absl::MutexLock lock(&written_mutex_);
    if (written_pool_.size() < kMaxWrittenSets) written_pool_.push_back(std::move(written));
  }

  std::shared_ptr<Client> client_;  // outlives compiled_ (declared first)
  const std::vector<size_t> writes_;
  std::unique_ptr<CompiledGraph> compiled_;
  absl::Mutex written_mutex_;
  std::vector<std::vector<at::Tensor>> written_pool_ ABSL_GUARDED_BY(written_mutex_);
};

}  // namespace
}  // namespace kiln::python

PYBIND11_MODULE(_kiln, module) {
  using namespace kiln;
  using namespace kiln::python;
  module.doc() = "The C++ half of the kiln package: use `import kiln`.";
  // The exception types are the package's (kiln/__init__.py), kept alive
  // for the life of the process.
  const py::module_ package = py::module_::import("kiln");
  kiln_error = py::object(package.attr("KilnError")).release().ptr();
  unsupported_op_error = py::object(package.attr("UnsupportedOpError")).release().ptr();
  guard_error = py::object(package.attr("GuardError")).release().ptr();
  daemon_unavailable = py::object(package.attr("DaemonUnavailable")).release().ptr();
  linalg_error =
      py::object(py::module_::import("torch.linalg").attr("LinAlgError")).release().ptr();

  // Kiln's kernels run on torch's intra-op threads, as many as
  // torch.get_num_threads() (client/runtime/thread_pool.h).
  Runtime::Default().pool().RunOn(&TorchLoops());

  // The op table's ops, each with the input dtypes it compiles: what the
  // package's partitioner asks before it sends a region to kilnd.
  module.def("op_table", [] {
    py::dict ops;
    for (const auto& [name, op] : kiln::ops::OpTable::Get().ops()) {
      py::list dtypes;
      for (const ir::DType dtype : op.dtypes) dtypes.append(ir::DTypeName(dtype));
      ops[py::str(name)] = dtypes;
    }
    return ops;
  });

  py::class_<Client, std::shared_ptr<Client>>(module, "Client")
      .def(py::init(&OpenClient), py::arg("socket_path") = "", py::arg("cache_dir") = "",
           py::arg("daemon_path") = "", py::arg("auto_start") = true)
      .def("daemon",
           [](Client& client) {
             absl::StatusOr<kiln::v1::HelloResponse> hello;
             {
               py::gil_scoped_release unlocked;
               const InterruptScope interruptible(&PythonSignalled);
               hello = client.daemon();
             }
             ThrowIfSignalled();
             return ToDict(ValueOrRaise(std::move(hello)));
           })
      .def("stats", [](Client& client) {
        absl::StatusOr<kiln::v1::StatsResponse> stats;
        {
          py::gil_scoped_release unlocked;
          const InterruptScope interruptible(&PythonSignalled);
          stats = client.Stats();
        }
        ThrowIfSignalled();
        return ToDict(ValueOrRaise(std::move(stats)));
      });

  py::class_<PyCompiledGraph>(module, "CompiledGraph")
      .def(py::init<std::shared_ptr<Client>, const py::bytes&, const std::string&,
                    const std::string&, std::vector<size_t>>(),
           py::arg("client"), py::arg("graph"), py::arg("target") = "native",
           py::arg("on_stride_miss") = "specialize", py::arg("writes") = std::vector<size_t>())
      .def("__call__", &PyCompiledGraph::Call)
      .def("prepare", &PyCompiledGraph::Prepare)
      .def("warmup", &PyCompiledGraph::Warmup, py::arg("entry_json"),
           py::arg("progress") = py::none())
      .def("artifact", &PyCompiledGraph::Artifact)
      .def("_median_cpp_run_ns", &PyCompiledGraph::MedianCppRunNs)
      .def("set_specialization_limit", &PyCompiledGraph::SetSpecializationLimit)
      .def("set_given_sizes_only", &PyCompiledGraph::SetGivenSizesOnly);
}
