#include "resil/inject/select.hpp"

#include <algorithm>
#include <bit>

namespace resil::inject {

bool is_counter(const ckpt::DatasetInfo& d) {
  if (d.path.starts_with("/meta/") || d.path == "/meta") return true;
  const auto slash = d.path.rfind('/');
  const std::string name = d.path.substr(slash + 1);
  if (name == "num_batches_tracked" || name == "global_step" || name == "iterations") return true;
  if (name == "step" && d.path.starts_with("/optimizer/")) return true;
  const bool integer = d.dtype && !ckpt::dtype_is_float(*d.dtype);
  return integer && d.numel() <= 1;
}

bool flippable(const ckpt::DatasetInfo& d) {
  // Virtual and external-storage data live in other files: never edited (docs/design/ckpt-flip-io.md).
  if (!d.dtype || d.layout == ckpt::Layout::virtual_ || !d.external.empty() || d.numel() == 0) return false;
  // A contiguous dataset never written has no storage: a fault in it makes HDF5 allocate and fill
  // all of it (10^11 f64: 800 GB for one flip). Chunks are allocated one at a time instead.
  return !(d.layout == ckpt::Layout::contiguous && d.stored_bytes == 0 && d.logical_bytes > max_fault_allocation);
}

uint128_t fault_bits(const ckpt::DatasetInfo& d) {
  return flippable(d) ? static_cast<uint128_t>(d.numel()) * ckpt::dtype_bits(*d.dtype) : 0;
}

bool matches_any_path(const Glob& g, const ckpt::DatasetInfo& d) {
  return g.matches(d.path) || std::any_of(d.aliases.begin(), d.aliases.end(), [&](const std::string& p) { return g.matches(p); });
}

TensorRole effective_role(const Tensor& t) {
  const auto& d = t.info;
  auto any_path = [&](TensorRole r) {
    return schema_role(d.path) == r || std::any_of(d.aliases.begin(), d.aliases.end(), [&](const std::string& p) { return schema_role(p) == r; });
  };
  for (const TensorRole r : {TensorRole::model, TensorRole::master, TensorRole::optimizer})
    if (t.role == r || any_path(r)) return r;
  return TensorRole::other;
}

std::vector<Target> select(const std::vector<ckpt::DatasetInfo>& datasets, const SelectOptions& opt) {
  std::vector<Tensor> tensors(datasets.size());
  for (std::size_t i = 0; i < datasets.size(); ++i) tensors[i].info = datasets[i];
  return select(tensors, opt);
}

std::vector<Target> select(const std::vector<Tensor>& tensors, const SelectOptions& opt) {
  std::vector<Glob> inc, exc;
  for (const auto& p : opt.include) inc.emplace_back(p);
  for (const auto& p : opt.exclude) exc.emplace_back(p);
  std::vector<Target> out;
  // How many tensors each filter kept, in the order they apply, so an empty selection names the
  // filter that emptied it.
  std::size_t owned = 0, in_role = 0, in_include = 0, not_counter = 0, counters = 0, not_excluded = 0;
  std::size_t role_count[4] = {0, 0, 0, 0};  // by TensorRole (model, master, optimizer, other): for the message
  for (const auto& tensor : tensors) {
    const auto& d = tensor.info;
    // Bytes shared by several tensors are one part of the fault space, under their owner.
    if (!flippable(d) || !tensor.shared_with.empty()) continue;
    ++owned;
    // A dataset under several paths (hard links) is one target, whichever path names it: it is
    // in a role, included or excluded when any of its paths is (the resil schema's paths, or the
    // role its format's layout gives it).
    const TensorRole role = effective_role(tensor);
    ++role_count[static_cast<int>(role)];
    if (opt.role == Role::model && role != TensorRole::model) continue;
    if (opt.role == Role::master && role != TensorRole::master) continue;
    if (opt.role == Role::optimizer && role != TensorRole::optimizer) continue;
    ++in_role;
    bool included = false;
    for (const auto& g : inc) included = included || matches_any_path(g, d);
    if (!inc.empty() && !included) continue;
    ++in_include;
    if (!included && counter_of(tensor)) {  // counters only when an --include names them
      ++counters;
      continue;
    }
    ++not_counter;
    bool excluded = false;
    for (const auto& g : exc) excluded = excluded || matches_any_path(g, d);
    if (excluded) continue;
    ++not_excluded;
    Target t{d, *d.dtype};
    if (opt.as && ckpt::dtype_size(*opt.as) == ckpt::dtype_size(t.dtype) && !ckpt::dtype_is_float(t.dtype)) t.dtype = *opt.as;
    t.allowed = opt.bits.mask_for(t.dtype);
    t.nbits = static_cast<unsigned>(std::popcount(t.allowed));
    if (t.nbits == 0) continue;
    out.push_back(std::move(t));
  }
  if (out.empty()) {
    auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& p : v) s += " " + p;
      return s;
    };
    std::string why;
    if (owned == 0) {
      why = "the file has no tensor with stored bits a fault can land in";
    } else if (in_role == 0) {
      const char* asked = opt.role == Role::model ? "model" : opt.role == Role::master ? "master" : "optimizer";
      // master weights are named only where they might have been meant: asked for, or present.
      const bool masters = opt.role == Role::master || role_count[1] > 0;
      why = std::string("--role ") + asked + " matched no tensor (this file's tensors: " + std::to_string(role_count[0]) + " model, " +
            (masters ? std::to_string(role_count[1]) + " master, " : std::string()) + std::to_string(role_count[2]) + " optimizer, " +
            std::to_string(role_count[3]) + " other; inspect shows each one's role)";
    } else if (in_include == 0) {
      why = "--include" + list(opt.include) + " matched no tensor" + (opt.role == Role::all ? std::string() : " of the selected role");
    } else if (not_counter == 0) {
      why = "every tensor left is a counter (" + std::to_string(counters) + "), which only an --include naming it selects";
    } else if (not_excluded == 0) {
      why = "--exclude" + list(opt.exclude) + " removed every tensor left";
    } else {
      why = "--bits " + opt.bits.text() + " selects no bit of the " + std::to_string(not_excluded) + " tensor(s) left (their dtypes lack those fields)";
    }
    throw NothingSelectedError("the selection is empty: " + why);
  }
  return out;
}

}  // namespace resil::inject
