// plan(): the drawn sites -> flip records. Reads each touched word once (through the file's Storage) and
// applies the fault model in site order, so records hitting one word chain.
#include "resil/inject/plan.hpp"

#include <unordered_map>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/inject/finite.hpp"
#include "resil/inject/storage.hpp"

namespace resil::inject {

std::vector<FlipRecord> plan(const std::string& file, std::span<const Target> targets, std::span<const Site> sites,
                             const PlanOptions& opt, Format format) {
  const auto st = open_storage(file, Access::read, format);
  auto out = plan(*st, targets, sites, opt);
  st->close();
  return out;
}

std::vector<FlipRecord> plan(Storage& wf, std::span<const Target> targets, std::span<const Site> sites,
                             const PlanOptions& opt) {
  // Current words of every touched element, read block by block (fn changes nothing: no write).
  std::vector<std::unordered_map<std::uint64_t, std::uint64_t>> current(targets.size());
  {
    std::vector<std::vector<std::uint64_t>> idx(targets.size());
    for (const auto& s : sites) idx[s.target].push_back(s.index);
    for (std::size_t t = 0; t < targets.size(); ++t) {
      if (idx[t].empty()) continue;
      const unsigned width = wf.width_of(targets[t].info.path);
      if (width != ckpt::dtype_bits(targets[t].dtype))
        throw UsageError(wf.path() + ": dataset " + targets[t].info.path + ": stored width " + std::to_string(width) +
                         " does not match dtype " + std::string(ckpt::dtype_name(targets[t].dtype)));
      current[t].reserve(idx[t].size());
      wf.edit(targets[t].info.path, std::move(idx[t]), [&](std::span<const std::uint64_t> i, std::span<std::uint64_t> w) {
        for (std::size_t k = 0; k < i.size(); ++k) current[t][i[k]] = w[k];
      });
    }
  }
  // A tp shard's sliced tensors: their slices of the global tensors, to log each flipped element's
  // global index beside its local one. An attribute that does not describe its dataset is refused
  // (the log would name elements that are not the flipped ones).
  std::vector<std::optional<ckpt::TpSlice>> slices(targets.size());
  for (const auto& s : sites) {
    const Target& t = targets[s.target];
    if (!t.info.tp_slice || slices[s.target]) continue;
    const std::string where = wf.path() + ": dataset " + t.info.path;
    auto slice = ckpt::TpSlice::from_json(*t.info.tp_slice, where);
    if (slice.local_shape() != t.info.shape)
      throw CorruptInputError(where + ": " + ckpt::tp_slice_attr + " describes a slice of shape " + ckpt::shape_string(slice.local_shape()) +
                              ", not the dataset's " + ckpt::shape_string(t.info.shape));
    uint128_t n = 1;
    for (const auto d : slice.global_shape)
      if ((n *= d) > UINT64_MAX) throw CorruptInputError(where + ": " + ckpt::tp_slice_attr + " has a global shape of more than 2^64 - 1 elements");
    slices[s.target] = std::move(slice);
  }
  // The model's draws: one stream in site order, or under --finite each site's own stream (the
  // draw tested each candidate's outcome on its own: finite.hpp).
  const std::uint64_t key = derive_seed(opt.seed, opt.trial);
  Rng rng(key, stream_model, opt.model_draws ? *opt.model_draws : 0);
  std::vector<FlipRecord> out;
  out.reserve(sites.size());
  for (const auto& s : sites) {
    const Target& t = targets[s.target];
    FlipRecord r;
    r.dataset = t.info.path;
    r.index = s.index;
    r.nd = unravel_index(s.index, t.info.shape);
    r.dtype = t.dtype;
    r.width = ckpt::dtype_bits(t.dtype);
    r.anchor = s.bit;
    if (const auto& slice = slices[s.target]) {
      const std::uint64_t g = slice->global_index(s.index);
      r.global = FlipRecord::Global{g, unravel_index(g, slice->global_shape), slice->global_shape};
    }
    r.location = wf.location(t.info.path, s.index);
    auto& w = current[s.target].at(s.index);
    r.old_bits = w;
    r.new_bits = opt.finite ? site_fault(opt.model, key, s, w, r.width, t.allowed) : opt.model.apply(w, r.width, s.bit, t.allowed, rng);
    w = r.new_bits;
    out.push_back(std::move(r));
  }
  if (opt.model_draws) *opt.model_draws = rng.position();
  return out;
}

std::vector<std::uint64_t> unravel_index(std::uint64_t flat, const ckpt::Shape& shape) {
  std::vector<std::uint64_t> nd(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    nd[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return nd;
}

}  // namespace resil::inject
