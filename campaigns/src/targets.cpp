// The campaign's selection, sampling strata and fault space (targets.hpp).
#include "targets.hpp"

#include <algorithm>
#include <bit>
#include <functional>
#include <map>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/names.hpp"
#include "resil/inject/storage.hpp"

namespace resil::inject::detail {

CampaignTargets select_all(const CampaignConfig& c, const CkptFiles& files) {
  SelectOptions so;
  so.include = c.include;
  so.exclude = c.exclude;
  so.role = c.role;
  so.bits = BitSpec::parse(c.bits.empty() ? "all" : c.bits);
  so.as = c.as;
  CampaignTargets s;
  std::string why;
  for (std::size_t f = 0; f < files.files.size(); ++f) {
    const auto tensors = open_storage(files.files[f].string(), Access::read, c.format)->tensors();  // the storage layer: any format
    std::vector<Target> t;
    try {
      t = select(tensors, so);
    } catch (const NothingSelectedError& e) {
      if (files.files.size() == 1) e.rethrow_with(files.files[f].string() + ": " + e.what());
      if (why.empty()) why = e.what();  // said when no shard has anything: which filter emptied it
      continue;  // a shard may hold nothing selected (e.g. an mp stage without parameters)
    }
    std::map<std::string, TensorRole> roles;
    for (const auto& y : tensors) roles.emplace(y.info.path, y.role);
    for (auto& x : t) {
      s.role.push_back(role_of(roles.at(x.info.path)));
      s.targets.push_back(std::move(x));
      s.file.push_back(f);
    }
  }
  if (s.targets.empty())
    throw NothingSelectedError(files.entry.string() + ": the campaign's selection matched no stored bit" + (why.empty() ? std::string() : " (first shard: " + why + ")"));
  return s;
}

namespace {

std::uint64_t field_mask(ckpt::DType t, const std::string& field) {
  const unsigned w = ckpt::dtype_bits(t);
  const auto fl = ckpt::float_layout(t);
  if (!fl) return field == "integer" ? width_mask(w) : 0;
  if (field == "sign") return std::uint64_t{1} << (w - 1);
  if (field == "exponent") return width_mask(fl->exponent_bits) << fl->mantissa_bits;
  if (field == "mantissa") return width_mask(fl->mantissa_bits);
  return 0;
}

std::string tensor_key(const CampaignTargets& s, const CkptFiles& f, std::size_t i) {
  return display_name(s.targets[i].info.path) + (f.rel[s.file[i]].empty() || f.files.size() == 1 ? "" : "@" + f.rel[s.file[i]]);
}

}  // namespace

std::vector<Stratum> make_strata(const CampaignConfig& c, const CampaignTargets& base, const CkptFiles& files) {
  std::vector<Stratum> out;
  auto add_filtered = [&](const std::string& label, const std::function<std::uint64_t(std::size_t)>& mask_of) {
    Stratum st{label, {}};
    for (std::size_t i = 0; i < base.targets.size(); ++i) {
      Target t = base.targets[i];
      t.allowed &= mask_of(i);
      t.nbits = static_cast<unsigned>(std::popcount(t.allowed));
      if (t.nbits == 0) continue;
      st.sel.targets.push_back(std::move(t));
      st.sel.file.push_back(base.file[i]);
      st.sel.role.push_back(base.role[i]);
    }
    if (!st.sel.targets.empty()) out.push_back(std::move(st));
  };
  const std::uint64_t all = ~std::uint64_t{0};
  if (c.strata == Strata::none) {
    out.push_back({"all", base});
  } else if (c.strata == Strata::field) {
    for (const std::string f : {"sign", "exponent", "mantissa", "integer"})
      add_filtered(f, [&](std::size_t i) { return field_mask(base.targets[i].dtype, f); });
  } else if (c.strata == Strata::bit) {
    for (unsigned b = 0; b < 64; ++b) add_filtered(std::to_string(b), [&](std::size_t) { return std::uint64_t{1} << b; });
  } else {
    std::vector<std::string> labels;
    auto label_of = [&](std::size_t i) -> std::string {
      if (c.strata == Strata::role) return base.role[i];
      if (c.strata == Strata::dtype) return std::string(ckpt::dtype_name(base.targets[i].dtype));
      return tensor_key(base, files, i);
    };
    for (std::size_t i = 0; i < base.targets.size(); ++i)
      if (std::find(labels.begin(), labels.end(), label_of(i)) == labels.end()) labels.push_back(label_of(i));
    for (const auto& l : labels) add_filtered(l, [&](std::size_t i) { return label_of(i) == l ? all : 0; });
  }
  return out;
}

FaultSpace space_of(const CampaignTargets& s, const CkptFiles& files) {
  FaultSpace sp;
  sp.total = s.bits();
  for (std::size_t i = 0; i < s.targets.size(); ++i) {
    const Target& t = s.targets[i];
    const double n = static_cast<double>(t.info.numel()), w = static_cast<double>(t.weight());
    const std::string dt(ckpt::dtype_name(t.dtype));
    for (unsigned b = 0; b < 64; ++b) {
      if (!((t.allowed >> b) & 1)) continue;
      sp.by["bit"][std::to_string(b)] += n;
      sp.by["field"][field_of(dt, b)] += n;
    }
    sp.by["role"][s.role[i]] += w;
    sp.by["dtype"][dt] += w;
    sp.by["tensor"][tensor_key(s, files, i)] += w;
  }
  return sp;
}

void for_each_checksum(const std::string& file, Format format, const std::function<void(const Tensor&, std::uint64_t)>& fn) {
  const auto st = open_storage(file, Access::read, format);
  for (const auto& t : st->tensors())
    if (t.info.dtype) fn(t, st->checksum(t.info.path));
}

}  // namespace resil::inject::detail
