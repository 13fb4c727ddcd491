#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <iostream>
#include <sstream>

#include "engine_impl.hpp"
#include "resil/app/main.hpp"
#include "resil/ckpt/checkpoint.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"

namespace resil::ectrain {

namespace {
volatile std::sig_atomic_t g_preempt = 0;
// First signal: checkpoint at the next step boundary. A second one: die as the default action would
// (a job stuck in a collective can still be ended with SIGTERM).
extern "C" void on_preempt_signal(int sig) {
  if (g_preempt) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  g_preempt = 1;
}

constexpr float adagrad_eps = 1e-8f;
}  // namespace

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void install_preemption_handlers() {
  std::signal(SIGTERM, on_preempt_signal);
  std::signal(SIGUSR1, on_preempt_signal);
}

void agree(const Mpi& mpi, const std::function<void()>& fn) {
  int code = 0;
  std::string what;
  try {
    fn();
  } catch (const Error& e) {
    code = static_cast<int>(e.exit_code());
    what = e.what();
  } catch (const std::bad_alloc&) {
    code = static_cast<int>(ExitCode::internal);
    what = "out of memory";
  } catch (const std::exception& e) {
    code = static_cast<int>(ExitCode::internal);
    what = std::string("internal error: ") + e.what();
  }
  if (mpi.allreduce_max(code != 0 ? 1 : 0) == 0) return;
  // The lowest failing rank reports; every rank exits with its code.
  const int reporter = mpi.size() - 1 - mpi.allreduce_max(code != 0 ? mpi.size() - 1 - mpi.rank() : -1);
  std::vector<int> agreed{mpi.rank() == reporter ? code : 0};
  mpi.allreduce_max(agreed);
  throw AgreedError(what, static_cast<ExitCode>(agreed[0]), mpi.rank() == reporter);
}

std::vector<FailSpec> parse_failures(const std::string& text) {
  std::vector<FailSpec> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto at = item.find('@');
    try {
      if (at == std::string::npos) throw std::invalid_argument("no @");
      std::size_t used = 0;
      FailSpec f;
      f.rank = std::stoi(item.substr(0, at), &used);
      if (used != at) throw std::invalid_argument("rank");
      f.step = std::stoll(item.substr(at + 1), &used);
      if (used != item.size() - at - 1) throw std::invalid_argument("step");
      if (f.rank < 0 || f.step < 1) throw std::invalid_argument("range");
      out.push_back(f);
    } catch (const std::logic_error&) {
      throw UsageError("--fail: '" + item + "' is not RANK@STEP (rank >= 0, step >= 1)");
    }
  }
  return out;
}

std::string Config::computation_json(int world) const {
  std::ostringstream o;
  o << "{\"world\":" << world << ",\"k\":" << k << ",\"m\":" << m << ",\"seed\":" << seed << ",\"tables\":" << tables
    << ",\"rows\":" << rows << ",\"dim\":" << dim << ",\"batch\":" << batch << ",\"rows_per_fragment\":" << rows_per_fragment
    << ",\"lr\":" << lr << ",\"mlp_lr\":" << mlp_lr << ",\"data\":\"" << data << "\"}";
  return o.str();
}

// ---------------------------------------------------------------------------------------------
DataSource::DataSource(const Config& cfg, int world, int rank, std::uint64_t seed)
    : cfg_(cfg), world_(world), rank_(rank), data_seed_(derive_seed(seed, 0xDA7Aull)),
      sizes_(data::criteo_num_sparse, cfg.rows) {
  if (!cfg.data.empty()) {
    file_ = data::read_criteo_tsv(cfg.data, sizes_);
    if (file_->n == 0) throw CorruptInputError("Criteo file " + cfg.data + " holds no samples");
  }
}

LocalBatch DataSource::batch(std::int64_t step) const {
  const int base = cfg_.batch / world_, extra = cfg_.batch % world_;
  LocalBatch b;
  b.n = base + (rank_ < extra ? 1 : 0);
  const std::uint64_t first = static_cast<std::uint64_t>(step - 1) * static_cast<std::uint64_t>(cfg_.batch) +
                              static_cast<std::uint64_t>(rank_ * base + std::min(rank_, extra));
  data::ClickSet gen;
  const data::ClickSet* src = nullptr;
  std::vector<std::size_t> at(static_cast<std::size_t>(b.n));
  if (file_) {
    src = &*file_;
    for (int i = 0; i < b.n; ++i) at[static_cast<std::size_t>(i)] = static_cast<std::size_t>((first + static_cast<std::uint64_t>(i)) % file_->n);
  } else {
    gen = data::synthetic_clicks(static_cast<std::size_t>(b.n), data_seed_, sizes_, first);
    src = &gen;
    for (int i = 0; i < b.n; ++i) at[static_cast<std::size_t>(i)] = static_cast<std::size_t>(i);
  }
  const auto T = static_cast<std::size_t>(cfg_.tables);
  for (std::size_t i : at) {
    b.dense.insert(b.dense.end(), src->dense.begin() + static_cast<std::ptrdiff_t>(i * data::criteo_num_dense),
                   src->dense.begin() + static_cast<std::ptrdiff_t>((i + 1) * data::criteo_num_dense));
    b.targets.push_back(src->labels[i]);
    for (std::size_t t = 0; t < T; ++t) b.rows.push_back(src->sparse[i * data::criteo_num_sparse + t]);
  }
  return b;
}

// ---------------------------------------------------------------------------------------------
Engine::Engine(Config cfg, const Mpi& mpi)
    : cfg_(std::move(cfg)), mpi_(mpi), be_(train::make_cpu_backend(1)),
      net_(*be_, static_cast<int>(data::criteo_num_dense), cfg_.tables, cfg_.dim, {32}, {32}),
      opt_(*be_, train::OptimizerConfig{"adam", cfg_.mlp_lr}),
      shards_(mpi, cfg_.k, cfg_.m, cfg_.tables, cfg_.rows, cfg_.dim, cfg_.rows_per_fragment) {
  opt_.attach(net_.params());
  active_.assign(static_cast<std::size_t>(mpi_.size()), -1);
  fired_.assign(cfg_.fail.size(), false);
}

// One training step, top to bottom: look up the batch's rows at their owners (decoding rows of
// lost fragments on the fly), forward/backward, reduce the MLP gradients, send row gradients to
// the owners, Adagrad on the rows, XOR deltas of the rows' bytes to the stripes' parity holders.
void Engine::train_step(std::int64_t step) {
  const int N = mpi_.size(), me = mpi_.rank(), T = cfg_.tables, d = cfg_.dim, k = cfg_.k;
  const auto sd = static_cast<std::size_t>(d);
  const auto rb = shards_.row_bytes();
  const auto& lay = shards_.layout();
  const LocalBatch b = data_->batch(step);

  // 1. The batch's distinct rows per table, and each sample's position among them.
  std::vector<std::vector<std::int32_t>> uniq(static_cast<std::size_t>(T)), idx(static_cast<std::size_t>(T));
  for (int t = 0; t < T; ++t) {
    auto& u = uniq[static_cast<std::size_t>(t)];
    for (int i = 0; i < b.n; ++i) u.push_back(b.rows[static_cast<std::size_t>(i * T + t)]);
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    for (int i = 0; i < b.n; ++i)
      idx[static_cast<std::size_t>(t)].push_back(static_cast<std::int32_t>(
          std::lower_bound(u.begin(), u.end(), b.rows[static_cast<std::size_t>(i * T + t)]) - u.begin()));
  }

  // 2. Ask each row's owner for it. A row whose fragment is lost (global knowledge) is also asked
  // of the k survivors its decode reads: they answer with their bytes in the reply round, so
  // degraded reads add bytes to the step's exchanges, not rounds.
  const bool recovering = shards_.any_lost();
  std::vector<ByteVec> req(static_cast<std::size_t>(N)), deg(static_cast<std::size_t>(N));
  std::vector<std::vector<std::pair<int, int>>> order(static_cast<std::size_t>(N));  // (table, position in uniq)
  struct Degraded {
    int table, pos;   // the row: table, position in uniq
    ec::RowPlace at;  // its place
  };
  std::vector<Degraded> my_lost;  // this rank's degraded reads, in the order asked
  std::vector<std::vector<std::uint8_t>> order_lost(static_cast<std::size_t>(N));  // per order entry: asked degraded
  for (int t = 0; t < T; ++t)
    for (std::size_t u = 0; u < uniq[static_cast<std::size_t>(t)].size(); ++u) {
      const RowId id{static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(uniq[static_cast<std::size_t>(t)][u])};
      const auto p = lay.locate(t, id.row);
      Writer(req[static_cast<std::size_t>(p.rank)]).put(id);
      order[static_cast<std::size_t>(p.rank)].emplace_back(t, static_cast<int>(u));
      const bool is_lost = recovering && shards_.lost(p.rank, p.stripe);
      order_lost[static_cast<std::size_t>(p.rank)].push_back(is_lost);
      if (is_lost) {
        for (int j : shards_.plan_of(p.stripe).sources()) Writer(deg[static_cast<std::size_t>(lay.rank_of(p.stripe, j))]).put(id);
        my_lost.push_back({t, static_cast<int>(u), p});
      }
    }
  // One message per rank, three framed parts: requests, degraded requests, and with ec the previous
  // step's parity deltas. Their arrival everywhere commits that step, one round earlier than a
  // round of their own.
  const auto asked_raw = mpi_.exchange_parts({&req, &deg, pending_step_ >= 0 ? &pending_deltas_ : nullptr});
  std::vector<std::vector<RowId>> asked(static_cast<std::size_t>(N)), deg_asked(static_cast<std::size_t>(N));
  std::vector<ByteView> deltas(static_cast<std::size_t>(N));
  std::vector<RowId> owned;  // rows of this rank that the step touches, sorted
  std::vector<RowId> serve;  // lost rows this rank is a decode source of, sorted
  for (int r = 0; r < N; ++r) {
    Reader rd(asked_raw.from(r), "row request");
    for (auto* list : {&asked[static_cast<std::size_t>(r)], &deg_asked[static_cast<std::size_t>(r)]}) {
      const auto part = rd.part();
      if (part.size() % sizeof(RowId) != 0) throw EcError("malformed row request from rank " + std::to_string(r));
      list->resize(part.size() / sizeof(RowId));
      if (!part.empty()) std::memcpy(list->data(), part.data(), part.size());
    }
    deltas[static_cast<std::size_t>(r)] = rd.part();
    if (!rd.done()) throw EcError("row request from rank " + std::to_string(r) + " is longer than expected");
    owned.insert(owned.end(), asked[static_cast<std::size_t>(r)].begin(), asked[static_cast<std::size_t>(r)].end());
    serve.insert(serve.end(), deg_asked[static_cast<std::size_t>(r)].begin(), deg_asked[static_cast<std::size_t>(r)].end());
  }
  // The last step's deltas: applied now when this step reads parity (degraded reads, rebuilds),
  // otherwise while the replies travel (nothing in them depends on parity).
  const auto committed = pending_step_;
  auto apply_committed = [&] {
    if (committed >= 0) shards_.apply_deltas(static_cast<std::uint64_t>(committed), deltas);
  };
  if (recovering) apply_committed();
  pending_step_ = -1;
  pending_deltas_.clear();
  for (auto* v : {&owned, &serve}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  auto pos_of = [&](const RowId& id) { return static_cast<std::size_t>(std::lower_bound(owned.begin(), owned.end(), id) - owned.begin()); };

  // 3. Their current bytes from the store; rows of lost fragments come decoded with the replies.
  std::vector<std::byte> old(owned.size() * rb);
  std::vector<std::size_t> lost_pos;
  std::vector<ec::RowPlace> place(owned.size());
  for (std::size_t i = 0; i < owned.size(); ++i) {
    const auto& p = place[i] = lay.locate(static_cast<int>(owned[i].table), owned[i].row);
    if (shards_.lost(me, p.stripe)) {
      lost_pos.push_back(i);
    } else {
      const auto src = shards_.row(owned[i]);
      std::memcpy(old.data() + i * rb, src.data(), rb);
    }
  }
  // While anything is lost, every rank takes the same rebuild round this step (the data is as of
  // the end of step - 1; the last step's deltas were applied above).
  std::vector<Shards::RebuildJob> jobs;
  std::vector<std::vector<ec::RowPlace>> serve_at(static_cast<std::size_t>(N));  // `serve` by owner
  if (recovering) {
    jobs = shards_.take_rebuild_jobs(cfg_.rebuild_stripes);
    for (const auto& id : serve) {
      const auto p = lay.locate(static_cast<int>(id.table), id.row);
      serve_at[static_cast<std::size_t>(p.rank)].push_back(p);
    }
  }

  // 4. Replies, per rank: the weights (not the accumulators) of the rows asked, except lost ones;
  // this rank's member bytes (weights) for each degraded read asked of it; whole rows of its
  // members for each owner of a lost row it is a source of (the owner needs the accumulators
  // too); whole source fragments for the rebuild jobs of that rank.
  const double r0 = now_seconds();
  double recovery_s = 0;
  std::vector<ByteVec> rep(static_cast<std::size_t>(N));
  for (int r = 0; r < N; ++r) {
    Writer w(rep[static_cast<std::size_t>(r)]);
    for (const auto& id : asked[static_cast<std::size_t>(r)]) {
      const auto i = pos_of(id);
      if (!shards_.lost(me, place[i].stripe)) w.put_bytes(old.data() + i * rb, sd * sizeof(float));
    }
    if (!recovering) continue;
    for (const auto& id : deg_asked[static_cast<std::size_t>(r)]) {
      const auto p = lay.locate(static_cast<int>(id.table), id.row);
      shards_.put_member_bytes(p.stripe, lay.fragment_on(p.stripe, me), p.offset, sd * sizeof(float), w);
    }
    for (const auto& p : serve_at[static_cast<std::size_t>(r)]) shards_.put_member_bytes(p.stripe, lay.fragment_on(p.stripe, me), p.offset, rb, w);
    shards_.put_rebuild_sources(jobs, r, w);
  }
  if (recovering) recovery_s += now_seconds() - r0;
  const auto got = recovering ? mpi_.exchange(rep) : mpi_.exchange(rep, apply_committed);
  const double r1 = now_seconds();
  std::vector<std::vector<float>> emb(static_cast<std::size_t>(T));
  for (int t = 0; t < T; ++t) emb[static_cast<std::size_t>(t)].resize(uniq[static_cast<std::size_t>(t)].size() * sd);
  std::vector<Reader> from;
  for (int r = 0; r < N; ++r) {
    from.emplace_back(got.from(r), "row reply");
    for (std::size_t q = 0; q < order[static_cast<std::size_t>(r)].size(); ++q) {
      if (order_lost[static_cast<std::size_t>(r)][q]) continue;
      const auto [t, u] = order[static_cast<std::size_t>(r)][q];
      std::memcpy(emb[static_cast<std::size_t>(t)].data() + static_cast<std::size_t>(u) * sd, from.back().take(sd * sizeof(float)), sd * sizeof(float));
    }
  }
  step_degraded_rows_ = 0;
  if (recovering) {
    // The same decode as the owner's below, of the weights only: bit-identical values.
    for (const auto& g : my_lost) {
      auto* dst = reinterpret_cast<std::byte*>(emb[static_cast<std::size_t>(g.table)].data() + static_cast<std::size_t>(g.pos) * sd);
      shards_.decode_member(g.at.stripe, shards_.plan_of(g.at.stripe), g.at.fragment, from, sd * sizeof(float), ec::Bytes(dst, sd * sizeof(float)));
    }
    // Whole rows (weights and accumulators) of this rank's lost rows, for the update below.
    for (std::size_t i : lost_pos)
      shards_.decode_member(place[i].stripe, shards_.plan_of(place[i].stripe), place[i].fragment, from, rb, ec::Bytes(old.data() + i * rb, rb));
    step_degraded_rows_ = lost_pos.size();
    shards_.finish_rebuild(jobs, from, static_cast<std::uint64_t>(step - 1));
    recovery_s += now_seconds() - r1;
    after_rebuild(step - 1, recovery_s);
  }
  for (int r = 0; r < N; ++r)
    if (!from[static_cast<std::size_t>(r)].done()) throw EcError("row reply from rank " + std::to_string(r) + " is longer than expected");

  // 5. Forward and backward on the local batch (gradients scaled by 1 / global batch).
  std::vector<std::vector<float>> egrad;
  const auto res = net_.forward_backward(b, emb, idx, 1.0f / static_cast<float>(cfg_.batch), egrad);

  // 6. MLP gradients summed in rank order, then the same Adam update on every replica.
  auto params = net_.params();
  std::vector<float> flat;
  for (auto& p : params) {
    const auto g = p.grad->to_host();
    flat.insert(flat.end(), g.begin(), g.end());
  }
  flat.push_back(static_cast<float>(res.loss_sum));
  mpi_.allreduce_sum_ordered(flat);
  std::size_t at = 0;
  for (auto& p : params) {
    std::vector<float> g(flat.begin() + static_cast<std::ptrdiff_t>(at), flat.begin() + static_cast<std::ptrdiff_t>(at + p.grad->numel()));
    p.grad->from_host(g);
    at += p.grad->numel();
  }
  loss_sum_ = flat.back();
  opt_.begin_step();
  for (auto& p : params) opt_.update(p);

  // 7. Row gradients to their owners; the owner sums them in rank order (failure-independent).
  std::vector<ByteVec> gout(static_cast<std::size_t>(N));
  for (int r = 0; r < N; ++r)
    for (const auto& [t, u] : order[static_cast<std::size_t>(r)])
      Writer(gout[static_cast<std::size_t>(r)]).put_bytes(reinterpret_cast<const std::byte*>(egrad[static_cast<std::size_t>(t)].data() + static_cast<std::size_t>(u) * sd), sd * sizeof(float));
  const auto gin = mpi_.exchange(gout);
  std::vector<float> gsum(owned.size() * sd, 0.0f);
  for (int r = 0; r < N; ++r) {
    Reader rd(gin.from(r), "row gradient");
    for (const auto& id : asked[static_cast<std::size_t>(r)]) {
      float g[256];
      std::memcpy(g, rd.take(sd * sizeof(float)), sd * sizeof(float));
      float* dst = gsum.data() + pos_of(id) * sd;
      for (std::size_t i = 0; i < sd; ++i) dst[i] += g[i];
    }
  }

  // 8. Adagrad on each touched row: [w | s] -> s += g^2, w -= lr g / (sqrt(s) + eps). The new bytes
  // go to the store even for a lost fragment (its rebuild writes the same bytes again); `old` keeps
  // the bytes before.
  for (std::size_t i = 0; i < owned.size(); ++i) {
    float v[512];
    std::memcpy(v, old.data() + i * rb, rb);
    const float* g = gsum.data() + i * sd;
    for (std::size_t q = 0; q < sd; ++q) {
      v[sd + q] += g[q] * g[q];
      v[q] -= cfg_.lr * g[q] / (std::sqrt(v[sd + q]) + adagrad_eps);
    }
    std::memcpy(shards_.row(owned[i]).data(), v, rb);
  }

  // 9. One delta message per (stripe, data fragment) to each of its m parity holders, tagged with
  // the step: per run of rows, [u64 stripe][u32 fragment][u32 rows] then [u32 offset][old XOR new]
  // per row. The XOR is computed straight into the first holder's message and copied to the
  // others. They leave with the next step's row requests (or flush_deltas()); when every holder
  // has applied them, the step commits.
  if (cfg_.ft != "ec") return;
  const std::size_t head = sizeof(std::uint64_t) + 2 * sizeof(std::uint32_t), per_row = sizeof(std::uint32_t) + rb;
  std::vector<std::pair<std::size_t, std::size_t>> runs;  // [begin, end) of owned rows in one (stripe, fragment)
  for (std::size_t i = 0; i < owned.size();) {
    std::size_t e = i + 1;
    while (e < owned.size() && place[e].stripe == place[i].stripe && place[e].fragment == place[i].fragment) ++e;
    runs.emplace_back(i, e);
    i = e;
  }
  pending_deltas_.assign(static_cast<std::size_t>(N), {});
  std::vector<std::size_t> need(static_cast<std::size_t>(N), 0);  // sized up front: one allocation each
  for (const auto& [i, e] : runs)
    for (int j = k; j < lay.n(); ++j) need[static_cast<std::size_t>(lay.place(place[i].stripe, j).rank)] += head + (e - i) * per_row;
  for (int r = 0; r < N; ++r) pending_deltas_[static_cast<std::size_t>(r)].reserve(need[static_cast<std::size_t>(r)]);
  for (const auto& [i, e] : runs) {
    const auto& p = place[i];
    const std::byte* first = nullptr;  // the first holder's copy of this run's rows
    for (int j = k; j < lay.n(); ++j) {
      Writer w(pending_deltas_[static_cast<std::size_t>(lay.place(p.stripe, j).rank)]);
      w.put(p.stripe);
      w.put(static_cast<std::uint32_t>(p.fragment));
      w.put(static_cast<std::uint32_t>(e - i));
      std::byte* out = w.grow((e - i) * per_row);
      if (first) {
        std::memcpy(out, first, (e - i) * per_row);
        continue;
      }
      first = out;
      for (std::size_t q = i; q < e; ++q, out += per_row) {
        const auto off = static_cast<std::uint32_t>(place[q].offset);
        std::memcpy(out, &off, sizeof off);
        ec::xor_delta(ec::ConstBytes(old.data() + q * rb, rb), shards_.row(owned[q]), ec::Bytes(out + sizeof off, rb));
      }
    }
  }
  pending_step_ = step;
}

void Engine::flush_deltas() {
  if (pending_step_ < 0) return;  // the same on every rank: all run the same steps
  const auto in = mpi_.exchange(pending_deltas_);
  std::vector<ByteView> parts;
  for (int r = 0; r < in.size(); ++r) parts.push_back(in.from(r));
  shards_.apply_deltas(static_cast<std::uint64_t>(pending_step_), parts);
  pending_step_ = -1;
  pending_deltas_.clear();
}

// ---------------------------------------------------------------------------------------------
// The MLP replicas and their Adam state, as bytes (a replacement copies them from a survivor).
ByteVec Engine::mlp_state() {
  ByteVec b;
  Writer w(b);
  for (auto& p : net_.params()) {
    const auto h = p.value->to_host();
    w.put_bytes(reinterpret_cast<const std::byte*>(h.data()), h.size() * sizeof(float));
  }
  for (auto& [param, slots] : opt_.slots())
    for (auto& [name, t] : slots) {
      const auto h = t.to_host();
      w.put_bytes(reinterpret_cast<const std::byte*>(h.data()), h.size() * sizeof(float));
    }
  w.put(opt_.step());
  return b;
}

void Engine::set_mlp_state(const ByteVec& b) {
  Reader rd(b, "MLP state");
  auto load = [&](train::Tensor& t) {
    std::vector<float> h(t.numel());
    std::memcpy(h.data(), rd.take(h.size() * sizeof(float)), h.size() * sizeof(float));
    t.from_host(h);
  };
  for (auto& p : net_.params()) load(*p.value);
  for (auto& [param, slots] : opt_.slots())
    for (auto& [name, t] : slots) load(t);
  opt_.set_step(rd.get<std::int64_t>());
}

std::optional<std::int64_t> Engine::inject(const std::vector<int>& ranks, std::int64_t step) {
  const int me = mpi_.rank(), N = mpi_.size();
  // Failures strike at a commit boundary: the last step's deltas are applied first (see
  // docs/ec-train.md, "Commit protocol").
  flush_deltas();
  const double t0 = now_seconds();
  // The failed rank loses everything it held in memory; a replacement with garbage memory takes
  // its slot (same rank number). Then it announces itself: a real collective every rank joins.
  const bool me_failed = std::find(ranks.begin(), ranks.end(), me) != ranks.end();
  if (me_failed) {
    auto garbage = mlp_state();
    std::fill(garbage.begin(), garbage.end(), std::byte{0xFF});  // NaN floats
    set_mlp_state(garbage);
  }
  std::vector<int> flags(static_cast<std::size_t>(N), 0);
  if (me_failed) flags[static_cast<std::size_t>(me)] = 1;
  mpi_.allreduce_max(flags);
  const double detect = now_seconds() - t0;
  const std::size_t first = fails_.size();
  for (int r = 0; r < N; ++r) {
    if (!flags[static_cast<std::size_t>(r)]) continue;
    FailRecord f;
    f.rank = r;
    f.step = step;
    f.t_fail = t0 - t_start_;
    f.detect_s = detect;
    if (active_[static_cast<std::size_t>(r)] >= 0) {
      fails_[static_cast<std::size_t>(active_[static_cast<std::size_t>(r)])].superseded = true;
      fails_[static_cast<std::size_t>(active_[static_cast<std::size_t>(r)])].outcome = "failed-again";
    }
    fails_.push_back(f);
    shards_.fail(r);  // on rank r: stores wiped, ledgers cleared; everywhere: its members lost
  }
  if (cfg_.ft == "none") {
    for (auto i = first; i < fails_.size(); ++i) fails_[i].outcome = "data-loss";
    throw DataLossError("step " + std::to_string(step) + ": rank " + std::to_string(fails_[first].rank) +
                        " lost its embedding shards and --ft none keeps no redundancy (use --ft ec or --ft ckpt)");
  }
  if (cfg_.ft == "ckpt") return rollback(step, first);

  // ec: more than m lost members in any stripe cannot be decoded. Never continue with wrong values.
  if (const auto s = shards_.over_limit()) {
    std::string who;
    for (int j : shards_.erased(*s)) who += (who.empty() ? "" : ",") + std::to_string(shards_.layout().rank_of(*s, j));
    const std::string what = "step " + std::to_string(step) + ": stripe " + std::to_string(*s) + " (table " +
                             std::to_string(shards_.layout().table_of(*s)) + ") lost " + std::to_string(shards_.erased(*s).size()) +
                             " members (ranks " + who + ") but m = " + std::to_string(cfg_.m) + " tolerates " + std::to_string(cfg_.m);
    if (!cfg_.fallback_ckpt) {
      for (auto i = first; i < fails_.size(); ++i) fails_[i].outcome = "data-loss";
      throw DataLossError(what + "; no --fallback-ckpt");
    }
    if (me == 0) std::cerr << "ec-train: " << what << "; restarting from the newest checkpoint (--fallback-ckpt)\n";
    return rollback(step, first);
  }
  // The MLP replicas and their optimizer state come from the lowest surviving rank.
  const double t1 = now_seconds();
  int root = 0;
  while (root < N && flags[static_cast<std::size_t>(root)]) ++root;
  auto state = mlp_state();
  mpi_.bcast(state, root);
  if (me_failed) set_mlp_state(state);
  const double restore = now_seconds() - t1;
  for (auto i = first; i < fails_.size(); ++i) {
    fails_[i].mlp_restore_s = restore;
    active_[static_cast<std::size_t>(fails_[i].rank)] = static_cast<int>(i);
  }
  return std::nullopt;
}

std::int64_t Engine::rollback(std::int64_t failed_step, std::size_t first_record) {
  // The newest checkpoint this run wrote or started from (not whatever else lies in the directory).
  std::optional<std::filesystem::path> from;
  if (last_ckpt_ >= 0 && ckpt::manifest_complete(ckpt::manifest_path(cfg_.ckpt_dir, last_ckpt_)))
    from = ckpt::manifest_path(cfg_.ckpt_dir, last_ckpt_);
  if (!from) throw DataLossError("step " + std::to_string(failed_step) + ": no complete checkpoint in " + cfg_.ckpt_dir.string() + " to restart from");
  const double t0 = now_seconds();
  const std::int64_t c = load_ckpt(*from);
  if (cfg_.ft == "ec") shards_.encode_all();  // fresh parity, nothing lost
  else shards_.clear_lost();
  std::fill(active_.begin(), active_.end(), -1);
  const double load = now_seconds() - t0;
  for (auto i = first_record; i < fails_.size(); ++i) {
    fails_[i].rollback_to = c;
    fails_[i].load_s = load;
    fails_[i].redo_steps = failed_step - 1 - c;
    fails_[i].outcome = "rolled-back";
    redo_records_.push_back(i);
  }
  redo_until_ = failed_step;
  t_redo_start_ = now_seconds();
  return c + 1;
}

void Engine::after_rebuild(std::int64_t step, double round_s) {
  for (int r = 0; r < mpi_.size(); ++r) {
    const int a = active_[static_cast<std::size_t>(r)];
    if (a < 0) continue;
    auto& f = fails_[static_cast<std::size_t>(a)];
    f.rebuild_s += round_s;
    ++f.degraded_steps;
    if (shards_.pending(r) == 0) {
      f.redundant_after_step = step;
      f.time_to_redundancy_s = now_seconds() - t_start_ - f.t_fail;
      f.outcome = "rebuilt";
      active_[static_cast<std::size_t>(r)] = -1;
    }
  }
}

std::string Engine::state_hash() {
  ckpt::Xxh64 h;
  shards_.hash_into(h);
  const auto mlp = mlp_state();
  h.update(mlp);
  return ckpt::hex_u64(h.digest());
}

int Engine::run() {
  const int me = mpi_.rank();
  t_start_ = now_seconds();
  // Start-up reads files each rank on its own (checkpoint shards, the TSV): the ranks agree on its
  // outcome, so a bad file ends every rank with one line and one exit code instead of MPI_Abort.
  std::optional<std::filesystem::path> resume;
  agree(mpi_, [&] { resume = resume_source(); });
  if (!cfg_.seed_given && !resume) {
    cfg_.seed = me == 0 ? draw_seed() : 0;
    mpi_.bcast(cfg_.seed, 0);
  }
  agree(mpi_, [&] {
    if (resume) {
      start_step_ = load_ckpt(*resume);
      resumed_from_ = start_step_;
    } else {
      net_.init(cfg_.seed);
      shards_.init_rows(cfg_.seed);
    }
    data_ = std::make_unique<DataSource>(cfg_, mpi_.size(), me, cfg_.seed);
  });
  if (me == 0)
    std::cout << "ec-train: " << mpi_.size() << " ranks, --ft " << cfg_.ft << ", k=" << cfg_.k << " m=" << cfg_.m << ", "
              << cfg_.tables << " tables x " << cfg_.rows << " rows x dim " << cfg_.dim << ", batch " << cfg_.batch << ", seed "
              << cfg_.seed << (cfg_.seed_given ? "" : " (drawn)") << (resume ? ", resumed from " + resume->string() : "") << "\n"
              << std::flush;
  if (cfg_.ft == "ec") shards_.encode_all();
  // Rollbacks need a checkpoint of the starting state in --ckpt-dir.
  if ((cfg_.ft == "ckpt" || cfg_.fallback_ckpt) && !(resume && ckpt::manifest_complete(ckpt::manifest_path(cfg_.ckpt_dir, start_step_))))
    save_ckpt(start_step_, false);
  for (std::size_t i = 0; i < cfg_.fail.size(); ++i) fired_[i] = cfg_.fail[i].step <= start_step_;

  app::Progress progress("ec-train", static_cast<std::uint64_t>(cfg_.steps));
  std::int64_t step = start_step_ + 1;
  while (step <= cfg_.steps) {
    if (redo_until_ == step) {  // a rollback's redo is done: redundancy is back
      for (auto i : redo_records_) {
        fails_[i].redo_s = now_seconds() - t_redo_start_;
        fails_[i].time_to_redundancy_s = now_seconds() - t_start_ - fails_[i].t_fail;
        fails_[i].redundant_after_step = step - 1;
      }
      redo_records_.clear();
      redo_until_ = -1;
    }
    // Preemption: at a step boundary every rank learns whether any rank was signalled.
    if (cfg_.signal_at == step && me == 0 && resumed_from_ < 0) std::raise(SIGUSR1);
    if (mpi_.allreduce_max(static_cast<int>(g_preempt))) {
      save_ckpt(step - 1, true);
      preempted_ = true;
      progress.finish();
      if (me == 0) std::cout << "ec-train: preempted: checkpoint of step " << step - 1 << " in " << cfg_.ckpt_dir.string()
                             << "; run the same command again to continue\n";
      write_report("", static_cast<int>(ExitCode::preempted), -1);
      return static_cast<int>(ExitCode::preempted);
    }
    std::vector<int> failing;
    for (std::size_t i = 0; i < cfg_.fail.size(); ++i)
      if (!fired_[i] && cfg_.fail[i].step == step) {
        fired_[i] = true;
        failing.push_back(cfg_.fail[i].rank);
      }
    if (!failing.empty())
      if (const auto next = inject(failing, step)) {
        step = *next;
        continue;
      }
    const double t0 = now_seconds();
    const std::string phase = redo_until_ > 0 ? "redo" : shards_.any_lost() ? "degraded" : "normal";
    train_step(step);
    if ((cfg_.ft == "ckpt" || cfg_.fallback_ckpt) && step % cfg_.ckpt_interval == 0 && step > last_ckpt_) save_ckpt(step, false);
    const double t1 = now_seconds();
    log_.push_back({step, t1 - t_start_, t1 - t0, loss_sum_ / cfg_.batch, phase});
    std::ostringstream extra;
    extra << "loss " << loss_sum_ / cfg_.batch << (phase == "normal" ? "" : " [" + phase + "]");
    progress.update(static_cast<std::uint64_t>(step), extra.str());
    ++step;
  }
  flush_deltas();
  // Finish any rebuild still running, so the final state is fully redundant before it is hashed.
  while (cfg_.ft == "ec" && shards_.any_lost()) {
    const double r0 = now_seconds();
    shards_.rebuild(0, static_cast<std::uint64_t>(cfg_.steps));
    after_rebuild(cfg_.steps, now_seconds() - r0);
  }
  progress.finish();
  const std::int64_t mismatches = cfg_.ft == "ec" ? static_cast<std::int64_t>(shards_.verify_parity()) : -1;
  const auto hash = state_hash();
  if (mismatches > 0) throw EcError(std::to_string(mismatches) + " parity fragments differ from a fresh encode of the data at the end");
  write_report(hash, 0, mismatches);
  print_summary(hash);
  return 0;
}

int run(Config cfg, const Mpi& mpi) {
  Engine e(std::move(cfg), mpi);
  return e.run();
}

}  // namespace resil::ectrain
