// The data-parallel reduction of one step.
#include <algorithm>
#include <cmath>

#include "run.hpp"

namespace resil::train {

/// Data-parallel reduction: gradients (and row-sparse touched-row masks) summed in rank order
/// on the host, or the gradients summed by NCCL on the device (--reduce nccl).
void Run::reduce(StepStats& stats) {
  std::vector<float>& flat = reduce_buf;
  flat.clear();
  if (dcomm) {
    std::vector<DeviceSpan> grads;
    for (const auto& p : params) grads.push_back({p.grad->data(), p.grad->numel()});
    dcomm->allreduce_sum(grads);
  } else {
    std::size_t n = 0;
    for (const auto& p : params) n += p.grad->numel();
    flat.resize(n);
    std::size_t off = 0;
    for (const auto& p : params) {
      if (p.grad->numel()) be->download(flat.data() + off, p.grad->data(), p.grad->numel());
      off += p.grad->numel();
    }
  }
  const auto touched = model->touched_rows();
  std::vector<std::size_t> mask_at;
  for (const auto& [name, rows] : touched) {
    const auto it = std::find_if(params.begin(), params.end(), [&](const ParamRef& p) { return p.name == name; });
    mask_at.push_back(flat.size());
    flat.resize(flat.size() + static_cast<std::size_t>(it->value->dim(0)), 0.0f);
    for (auto r : rows) flat[mask_at.back() + static_cast<std::size_t>(r)] = 1.0f;
  }
  if (!flat.empty()) comm.allreduce_sum(flat);
  if (!dcomm) {
    std::size_t off = 0;
    for (const auto& p : params) {
      be->upload(p.grad->data(), flat.data() + off, p.grad->numel());
      off += p.grad->numel();
    }
  }
  for (std::size_t t = 0; t < touched.size(); ++t) {
    const auto it = std::find_if(params.begin(), params.end(), [&](const ParamRef& p) { return p.name == touched[t].first; });
    std::vector<std::int32_t> rows;
    for (int r = 0; r < it->value->dim(0); ++r)
      if (flat[mask_at[t] + static_cast<std::size_t>(r)] > 0.0f) rows.push_back(r);
    model->set_touched_rows(touched[t].first, std::move(rows));
  }
  std::vector<double> s = {stats.loss_sum, static_cast<double>(stats.correct), static_cast<double>(stats.samples)};
  comm.allreduce_sum(s);
  stats = {s[0], static_cast<std::int64_t>(s[1]), static_cast<std::int64_t>(s[2])};
}
double Run::clip_gradients() {
  // Each parameter's sum of squares in double, parameters in order; an mp stage holds only its own,
  // so the stages' partial sums meet in one sum where each entry has one non-zero term (exact), then
  // are added in rank order: the norm does not depend on how the sum travelled.
  double local = 0.0;
  double total = 0.0;
  if (mode == ckpt::ParallelMode::tp && comm.size() > 1) {
    // tp: a parameter held whole is the same on every rank and counts once; a sliced one is the
    // sum of its slices' sums of squares in rank order; then parameters in order, as one process.
    const std::size_t R = static_cast<std::size_t>(comm.size()), r = static_cast<std::size_t>(comm.rank());
    std::vector<double> parts(params.size() * R, 0.0);
    std::vector<ConstSpan> mine;
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < params.size(); ++i)
      if (slices.count(params[i].name) || r == 0) {
        mine.push_back({params[i].grad->data(), params[i].grad->numel()});
        at.push_back(i);
      }
    const std::vector<double> sums = be->sum_squares_many(mine);  // one synchronisation with a device
    for (std::size_t j = 0; j < at.size(); ++j) parts[at[j] * R + r] = sums[j];
    comm.allreduce_sum(parts);
    for (std::size_t i = 0; i < params.size(); ++i) {
      double p = 0.0;
      for (std::size_t k = 0; k < R; ++k) p += parts[i * R + k];
      total += p;
    }
  } else {
    // mp of a gpt: the last stage's copy of wte is counted on the first stage only
    std::vector<ConstSpan> counted;
    for (const auto& p : params)
      if (!gpt_stage || !gpt_stage->is_copy(p.name)) counted.push_back({p.grad->data(), p.grad->numel()});
    for (const double x : be->sum_squares_many(counted)) local += x;
    total = local;
  }
  if (mode == ckpt::ParallelMode::mp && comm.size() > 1) {
    std::vector<double> parts(static_cast<std::size_t>(comm.size()), 0.0);
    parts[static_cast<std::size_t>(comm.rank())] = local;
    comm.allreduce_sum(parts);
    total = 0.0;
    for (const double x : parts) total += x;
  }
  const double norm = std::sqrt(total);
  // torch.nn.utils.clip_grad_norm_'s rule: scale by max_norm / (norm + 1e-6) when that is below 1.
  const double coef = static_cast<double>(cfg.optimizer.clip) / (norm + 1e-6);
  if (coef < 1.0)
    for (const auto& p : params) be->scale(p.grad->data(), p.grad->numel(), static_cast<float>(coef));
  return norm;
}

}  // namespace resil::train
