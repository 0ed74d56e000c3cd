// Training state adapters. See trainscope/torch/state.h.
#include "trainscope/torch/state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/serialize.h>

#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"

namespace trainscope::libtorch {
namespace {

absl::Status LoadError(const std::string& what, const std::exception& e) {
  std::string message = e.what();
  if (const size_t eol = message.find('\n'); eol != std::string::npos) message.resize(eol);
  return absl::DataLossError("cannot restore " + what + ": " + message);
}

// The tensors an object holds now: where its loaded tensors belong.
std::vector<at::Tensor> OwnTensors(::torch::nn::Module& module) {
  std::vector<at::Tensor> tensors = module.parameters();
  for (const at::Tensor& b : module.buffers()) tensors.push_back(b);
  return tensors;
}
std::vector<at::Tensor> OwnTensors(::torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> tensors;
  for (auto& group : optimizer.param_groups()) {
    for (const at::Tensor& p : group.params()) tensors.push_back(p);
  }
  return tensors;
}

// Where an archive's tensors are loaded: the one device `tensors` are on;
// the CPU when they are on several (a module's are then moved back one by
// one, ReturnToDevices); as saved when there are none. Loading as saved
// would move the parameters to the saving process's device (InputArchive
// replaces a tensor's data when the devices differ): rank 1 restoring rank
// 0's cuda:0 checkpoint would train on GPU 0.
std::optional<at::Device> LoadDevice(const std::vector<at::Tensor>& tensors) {
  std::optional<at::Device> device;
  for (const at::Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (!device) {
      device = t.device();
    } else if (*device != t.device()) {
      return at::Device(at::kCPU);
    }
  }
  return device;
}

// Each named parameter and buffer's device, before a load.
std::vector<std::pair<std::string, at::Device>> Devices(::torch::nn::Module& module) {
  std::vector<std::pair<std::string, at::Device>> out;
  for (const auto& p : module.named_parameters()) out.emplace_back(p.key(), p.value().device());
  for (const auto& b : module.named_buffers()) out.emplace_back(b.key(), b.value().device());
  return out;
}
std::vector<std::pair<std::string, at::Device>> Devices(::torch::optim::Optimizer&) { return {}; }

// After a load: every parameter and buffer back on its device of before.
void ReturnToDevices(::torch::nn::Module& module,
                     const std::vector<std::pair<std::string, at::Device>>& before) {
  ::torch::NoGradGuard no_grad;
  auto params = module.named_parameters();
  auto buffers = module.named_buffers();
  for (const auto& [name, device] : before) {
    at::Tensor* t = params.find(name);
    if (t == nullptr) t = buffers.find(name);
    if (t != nullptr && t->device() != device) t->set_data(t->to(device));
  }
}
void ReturnToDevices(::torch::optim::Optimizer&,
                     const std::vector<std::pair<std::string, at::Device>>&) {}

// A module or an optimizer: anything with save(OutputArchive&) and
// load(InputArchive&), through LibTorch's archive format. Loaded tensors
// stay on the object's device(s) (LoadDevice).
template <typename T>
class ArchiveState : public Stateful {
 public:
  ArchiveState(T& object, const char* what) : object_(object), what_(what) {}
  absl::StatusOr<std::string> Save() override {
    try {
      ::torch::serialize::OutputArchive archive;
      object_.save(archive);
      std::ostringstream out;
      archive.save_to(out);
      return out.str();
    } catch (const std::exception& e) {
      return absl::InternalError(std::string("saving ") + what_ + ": " + e.what());
    }
  }
  absl::Status Load(const std::string& bytes) override {
    try {
      ::torch::serialize::InputArchive archive;
      std::istringstream in(bytes);
      const auto before = Devices(object_);
      archive.load_from(in, LoadDevice(OwnTensors(object_)));
      object_.load(archive);
      ReturnToDevices(object_, before);
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return LoadError(what_, e);
    }
  }

 private:
  T& object_;
  const char* what_;
};

class ScalerState : public Stateful {
 public:
  explicit ScalerState(GradScaler& scaler) : scaler_(scaler) {}
  absl::StatusOr<std::string> Save() override {
    const GradScaler::State s = scaler_.state();
    std::ostringstream out;
    out.precision(17);
    out << s.scale << ' ' << s.growth_tracker << ' ' << s.skipped_steps << ' '
        << s.options.init_scale << ' ' << s.options.growth_factor << ' ' << s.options.backoff_factor
        << ' ' << s.options.growth_interval << ' ' << s.options.min_scale << ' '
        << s.options.enabled << '\n';
    return out.str();
  }
  absl::Status Load(const std::string& bytes) override {
    GradScaler::State s;
    std::istringstream in(bytes);
    in >> s.scale >> s.growth_tracker >> s.skipped_steps >> s.options.init_scale >>
        s.options.growth_factor >> s.options.backoff_factor >> s.options.growth_interval >>
        s.options.min_scale >> s.options.enabled;
    if (!in) return absl::DataLossError("cannot restore the GradScaler: malformed state");
    return scaler_.Load(s);
  }

 private:
  GradScaler& scaler_;
};

// A generator's state as bytes.
std::string GeneratorBytes(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  const at::Tensor state = generator.get_state();
  return std::string(static_cast<const char*>(state.data_ptr()),
                     static_cast<size_t>(state.nbytes()));
}

void SetGeneratorBytes(at::Generator generator, const std::string& bytes) {
  at::Tensor state = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

// rng.pt: "<count>\n" then, per generator, "<size>\n<bytes>".
class RngState : public Stateful {
 public:
  absl::StatusOr<std::string> Save() override {
    std::vector<std::string> states = {GeneratorBytes(at::detail::getDefaultCPUGenerator())};
    if (::torch::cuda::is_available()) {
      for (int64_t d = 0; d < static_cast<int64_t>(::torch::cuda::device_count()); ++d) {
        states.push_back(GeneratorBytes(
            at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<int8_t>(d)))));
      }
    }
    std::string out = std::to_string(states.size()) + "\n";
    for (const std::string& s : states) out += std::to_string(s.size()) + "\n" + s;
    return out;
  }
  absl::Status Load(const std::string& bytes) override {
    try {
      size_t at = 0;
      auto number = [&]() -> int64_t {
        const size_t eol = bytes.find('\n', at);
        if (eol == std::string::npos) throw std::runtime_error("truncated");
        const int64_t v = std::stoll(bytes.substr(at, eol - at));
        at = eol + 1;
        return v;
      };
      const int64_t count = number();
      for (int64_t k = 0; k < count; ++k) {
        const int64_t size = number();
        if (size < 0 || at + static_cast<size_t>(size) > bytes.size()) {
          throw std::runtime_error("truncated");
        }
        const std::string state = bytes.substr(at, static_cast<size_t>(size));
        at += static_cast<size_t>(size);
        if (k == 0) {
          SetGeneratorBytes(at::detail::getDefaultCPUGenerator(), state);
        } else if (::torch::cuda::is_available() &&
                   k - 1 < static_cast<int64_t>(::torch::cuda::device_count())) {
          SetGeneratorBytes(at::globalContext().defaultGenerator(
                                at::Device(at::kCUDA, static_cast<int8_t>(k - 1))),
                            state);
        }
      }
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return LoadError("the RNG state", e);
    }
  }
};

// values.json-like: "key\tvalue\n" lines (keys and values without tabs or
// newlines are written as is; others are escaped).
std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      const char n = s[++i];
      out += n == 't' ? '\t' : n == 'n' ? '\n' : n;
    } else {
      out += s[i];
    }
  }
  return out;
}

constexpr char kValuesFile[] = "values.tsv";

}  // namespace

void TrainingState::Add(const std::string& name, ::torch::nn::Module& module) {
  Add(name, std::make_unique<ArchiveState<::torch::nn::Module>>(module, "the module"));
}
void TrainingState::Add(const std::string& name, ::torch::optim::Optimizer& optimizer) {
  Add(name, std::make_unique<ArchiveState<::torch::optim::Optimizer>>(optimizer, "the optimizer"));
}
void TrainingState::Add(const std::string& name, GradScaler& scaler) {
  Add(name, std::make_unique<ScalerState>(scaler));
}
void TrainingState::Add(const std::string& name, std::unique_ptr<Stateful> part) {
  parts_.emplace_back(name + ".pt", std::move(part));
}
void TrainingState::AddRng() { Add("rng", std::make_unique<RngState>()); }

void TrainingState::SetValue(const std::string& key, const std::string& value) {
  values_[key] = value;
}
std::string TrainingState::Value(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

void TrainingState::SetLoaderPosition(const LoaderPosition& p) {
  SetValue("loader.epoch", std::to_string(p.epoch));
  SetValue("loader.batch_index", std::to_string(p.batch_index));
  SetValue("loader.sampler_seed", std::to_string(p.sampler_seed));
}

LoaderPosition TrainingState::loader_position() const {
  // absl::SimpleAtoi, not std::stoll: a value that is not a number (one a
  // caller set by hand) reads as 0 instead of throwing into user code.
  LoaderPosition p;
  if (!absl::SimpleAtoi(Value("loader.epoch", "0"), &p.epoch)) p.epoch = 0;
  if (!absl::SimpleAtoi(Value("loader.batch_index", "0"), &p.batch_index)) p.batch_index = 0;
  if (!absl::SimpleAtoi(Value("loader.sampler_seed", "0"), &p.sampler_seed)) p.sampler_seed = 0;
  return p;
}

absl::StatusOr<std::vector<CheckpointFile>> TrainingState::Snapshot() {
  std::vector<CheckpointFile> files;
  for (auto& [name, part] : parts_) {
    absl::StatusOr<std::string> bytes = part->Save();
    if (!bytes.ok()) {
      return absl::Status(bytes.status().code(),
                          name + ": " + std::string(bytes.status().message()));
    }
    files.push_back({name, std::move(*bytes)});
  }
  std::string values;
  for (const auto& [k, v] : values_) values += Escape(k) + "\t" + Escape(v) + "\n";
  files.push_back({kValuesFile, std::move(values)});
  return files;
}

absl::Status TrainingState::Restore(const LoadedCheckpoint& checkpoint) {
  auto find = [&](const std::string& name) -> const std::string* {
    for (const CheckpointFile& f : checkpoint.files) {
      if (f.name == name) return &f.bytes;
    }
    return nullptr;
  };
  for (auto& [name, part] : parts_) {
    const std::string* bytes = find(name);
    if (bytes == nullptr) {
      return absl::NotFoundError("checkpoint " + checkpoint.path + " has no " + name);
    }
    if (absl::Status s = part->Load(*bytes); !s.ok()) {
      return absl::Status(s.code(), checkpoint.path + "/" + name + ": " + std::string(s.message()));
    }
  }
  if (const std::string* values = find(kValuesFile)) {
    std::istringstream in(*values);
    std::string line;
    while (std::getline(in, line)) {
      const size_t tab = line.find('\t');
      if (tab == std::string::npos) continue;
      values_[Unescape(line.substr(0, tab))] = Unescape(line.substr(tab + 1));
    }
  }
  return absl::OkStatus();
}

}  // namespace trainscope::libtorch
