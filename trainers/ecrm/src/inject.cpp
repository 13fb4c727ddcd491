// --inject: in-memory bit flips into a rank's live state (shard rows, parity rows, MLP replica,
// Adam state), reproducible from --inject-seed and logged as a flip log; and the scrub's round in
// a step (Scrub, scrub.hpp), which finds and repairs what flips do to the shard store.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "engine_impl.hpp"
#include "resil/core/rng.hpp"
#include "resil/config.hpp"

namespace resil::ecrm {

namespace {
std::string hex32(std::uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", v);
  return b;
}
nlohmann::json value_json(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  if (f != f) return "nan";
  if (f == std::numeric_limits<float>::infinity()) return "inf";
  if (f == -std::numeric_limits<float>::infinity()) return "-inf";
  return static_cast<double>(f);
}

// The draws of one --inject item: a pure function of (seed, item, draw number).
struct Draws {
  std::uint64_t key, item, n = 0;
  std::uint64_t next(std::uint64_t bound) { return bound ? Rng::at(key, item, n++) % bound : 0; }
};

// `bits` distinct bit positions of a 32-bit word, the first the anchor.
std::vector<int> draw_bits(Draws& d, int bits) {
  std::vector<int> all(32);
  for (int i = 0; i < 32; ++i) all[static_cast<std::size_t>(i)] = i;
  for (int i = 0; i < bits; ++i) std::swap(all[static_cast<std::size_t>(i)], all[static_cast<std::size_t>(i) + d.next(static_cast<std::uint64_t>(32 - i))]);
  return {all.begin(), all.begin() + bits};
}

// Flip `bits` in the 32-bit word at `w`; the record's word fields.
void flip_word(std::byte* w, const std::vector<int>& bits, nlohmann::json& rec) {
  std::uint32_t old;
  std::memcpy(&old, w, sizeof old);
  std::uint32_t mask = 0;
  for (int b : bits) mask |= std::uint32_t{1} << b;
  const std::uint32_t now = old ^ mask;
  std::memcpy(w, &now, sizeof now);
  std::vector<int> sorted = bits;
  std::sort(sorted.begin(), sorted.end());
  rec["dtype"] = "f32";
  rec["anchor"] = bits.front();
  rec["bits"] = sorted;
  rec["mask"] = hex32(mask);
  rec["old"] = hex32(old);
  rec["new"] = hex32(now);
  rec["old_value"] = value_json(old);
  rec["new_value"] = value_json(now);
}
}  // namespace

void Engine::inject_flips(std::int64_t step, bool at_delta) {
  std::vector<std::size_t> due;
  for (std::size_t i = 0; i < cfg_.inject.size(); ++i)
    if (cfg_.inject[i].step == step && cfg_.inject[i].at_delta == at_delta && !(schedule_.kills_fired() & inject_bit(i))) due.push_back(i);
  if (due.empty()) return;  // the same on every rank
  // Recorded as fired before any bit changes: a relaunch never flips the same bits back.
  std::uint64_t mask = schedule_.kills_fired();
  for (auto i : due) mask |= inject_bit(i);
  schedule_.set_kills_fired(mask);
  if (seg_) seg_->set_kills_fired(mask);

  const int me = net_.rank(), N = net_.size(), k = cfg_.k;
  const auto& lay = store_.layout();
  const auto rb = store_.row_bytes();
  const double t = now_seconds() - t_start_;
  ByteVec lines;  // this rank's records, one JSON line each
  for (auto i : due) {
    const auto& f = cfg_.inject[i];
    Draws d{derive_seed(cfg_.inject_seed, 0x1F1B5EEDull), i};
    const std::string target(inject_target_name(f.target));
    // The sites: (rank, and where) for every word this item flips.
    struct Site {
      int rank;
      std::uint64_t stripe;
      int member;
      std::uint32_t row, word;
    };
    std::vector<Site> sites;
    if (f.target == InjectTarget::row && f.at_delta) {
      // Between the row updates and the deltas: one of the rows this step updated on the rank
      // (only that rank knows them, and only it draws further).
      const int r = f.rank >= 0 ? f.rank : static_cast<int>(d.next(static_cast<std::uint64_t>(N)));
      if (r != me) continue;
      std::vector<ec::RowPlace> upd;
      for (const auto& id : rows_.owned())
        if (const auto p = lay.locate(static_cast<int>(id.table), id.row); !recovery_.lost(me, p.stripe)) upd.push_back(p);
      if (upd.empty()) continue;
      const auto& p = upd[d.next(upd.size())];
      sites.push_back({r, p.stripe, p.fragment, static_cast<std::uint32_t>(p.offset / rb), static_cast<std::uint32_t>(d.next(rb / 4))});
    } else if (f.target == InjectTarget::row || f.target == InjectTarget::parity) {
      const int r = f.rank >= 0 ? f.rank : static_cast<int>(d.next(static_cast<std::uint64_t>(N)));
      std::vector<std::pair<std::uint64_t, int>> held;  // this rank's members of the kind, not lost
      for (std::uint64_t s = 0; s < lay.stripes(); ++s) {
        const int j = lay.fragment_on(s, r);
        if (j >= 0 && (j < k) == (f.target == InjectTarget::row) && !recovery_.lost(r, s)) held.emplace_back(s, j);
      }
      if (held.empty()) continue;  // nothing of that kind on the rank (k + m = ranks and no parity there): no flip
      const auto [s, j] = held[d.next(held.size())];
      const auto row = static_cast<std::uint32_t>(d.next(lay.rows_per_fragment()));
      sites.push_back({r, s, j, row, static_cast<std::uint32_t>(d.next(rb / 4))});
    } else if (f.target == InjectTarget::stripe) {
      const std::uint64_t s = f.stripe >= 0 ? static_cast<std::uint64_t>(f.stripe) % lay.stripes() : d.next(lay.stripes());
      const auto drawn_row = static_cast<std::uint32_t>(d.next(lay.rows_per_fragment()));
      const auto row = f.row >= 0 ? static_cast<std::uint32_t>(f.row) : drawn_row;
      std::vector<int> members(static_cast<std::size_t>(lay.n()));
      for (int j = 0; j < lay.n(); ++j) members[static_cast<std::size_t>(j)] = j;
      if (f.member >= 0) std::swap(members[0], members[static_cast<std::size_t>(f.member)]);
      for (int q = f.member >= 0 ? 1 : 0; q < f.members; ++q)
        std::swap(members[static_cast<std::size_t>(q)], members[static_cast<std::size_t>(q) + d.next(static_cast<std::uint64_t>(lay.n() - q))]);
      for (int q = 0; q < f.members; ++q) {
        const int j = members[static_cast<std::size_t>(q)];
        sites.push_back({lay.rank_of(s, j), s, j, row, static_cast<std::uint32_t>(d.next(rb / 4))});
      }
    } else {
      const int r = f.rank >= 0 ? f.rank : static_cast<int>(d.next(static_cast<std::uint64_t>(N)));
      sites.push_back({r, 0, -1, 0, 0});
    }
    for (auto& site : sites) {
      const auto bits = draw_bits(d, f.bits);
      const std::uint64_t pick = Rng::at(d.key, d.item, d.n++);  // the MLP / Adam element, drawn on every rank alike
      if (site.rank != me) continue;
      nlohmann::json rec;
      rec["type"] = "flip";
      rec["step"] = step;
      rec["rank"] = me;
      rec["target"] = target;
      rec["inject"] = f.text;
      rec["item"] = i;
      if (site.member >= 0) {
        const int tb = lay.table_of(site.stripe);
        const auto p = lay.place(site.stripe, site.member);
        auto bytes = store_.member(tb, site.member, p).subspan(std::size_t{site.row} * rb, rb);
        const auto half = rb / 8;  // floats per half row: [dim weights | dim accumulators]
        if (site.member < k) {
          // The table row: fragment q = (stripe - first) * k + member, row = q * B + row.
          const std::uint64_t q = (site.stripe - lay.first_stripe(tb)) * static_cast<std::uint64_t>(k) + static_cast<std::uint64_t>(site.member);
          const std::uint64_t table_row = q * lay.rows_per_fragment() + site.row;
          rec["dataset"] = "/embedding/table" + std::to_string(tb) + (site.word < half ? "/weight" : "/adagrad");
          rec["index"] = table_row * half + site.word % half;
          rec["nd"] = {table_row, site.word % half};
          rec["padding"] = table_row >= lay.table(tb).rows;
        } else {
          rec["dataset"] = "/parity/table" + std::to_string(tb);
          rec["index"] = site.word;
        }
        rec["stripe"] = site.stripe;
        rec["member"] = site.member;
        rec["member_row"] = site.row;
        flip_word(bytes.data() + std::size_t{site.word} * 4, bits, rec);
      } else {
        // A parameter of the replica, or one of its Adam slots; the element drawn over all of them.
        std::vector<std::pair<std::string, train::Tensor*>> tensors;
        if (f.target == InjectTarget::mlp) {
          for (auto& p : net_model_.params()) tensors.emplace_back("/model/" + p.name, p.value);
        } else {
          for (auto& [param, slots] : opt_.slots())
            for (auto& [name, tensor] : slots) tensors.emplace_back("/optimizer/" + param + "/" + name, &tensor);
        }
        std::uint64_t total = 0;
        for (auto& [n, tt] : tensors) total += tt->numel();
        if (total == 0) continue;
        std::uint64_t at = pick % total;
        for (auto& [name, tt] : tensors) {
          if (at >= tt->numel()) {
            at -= tt->numel();
            continue;
          }
          auto h = tt->to_host();
          rec["dataset"] = name;
          rec["index"] = at;
          flip_word(reinterpret_cast<std::byte*>(h.data() + at), bits, rec);
          tt->from_host(h);
          break;
        }
      }
      const auto line = rec.dump() + "\n";
      lines.insert(lines.end(), reinterpret_cast<const std::byte*>(line.data()), reinterpret_cast<const std::byte*>(line.data() + line.size()));
    }
  }
  // Rank 0 writes the flip log (records in rank order) and keeps them for the report.
  const auto all = net_.gather(lines, 0);
  if (me != 0) return;
  std::ofstream log;
  if (!cfg_.inject_log.empty()) log.open(cfg_.inject_log, std::ios::app);
  for (const auto& b : all) {
    const std::string text(reinterpret_cast<const char*>(b.data()), b.size());
    if (log) log << text;
    for (std::size_t pos = 0; pos < text.size();) {
      const auto nl = text.find('\n', pos);
      const auto j = nlohmann::json::parse(text.substr(pos, nl - pos));
      InjectRecord ir;
      ir.item = j["item"].get<std::size_t>();
      ir.step = j["step"].get<std::int64_t>();
      ir.rank = j["rank"].get<int>();
      ir.target = j["target"].get<std::string>();
      ir.dataset = j["dataset"].get<std::string>();
      if (j.contains("stripe"))
        ir.stripe = j["stripe"].get<std::int64_t>(), ir.member = j["member"].get<std::int64_t>(), ir.row = j["member_row"].get<std::int64_t>();
      ir.t = t;
      injected_.push_back(ir);
      pos = nl + 1;
    }
  }
}

void Engine::scrub_round(std::int64_t step, const std::vector<Recovery::RebuildJob>& jobs) {
  scrub_step_ = step;
  if (cfg_.scrub_touched) scrub_.check_rows(rows_.owned());
  // Whatever the cadence: a decode never reads an unchecked row.
  if (recovery_.any_lost()) scrub_.check_sources(rows_.decode_sources(), jobs);
  if (cfg_.scrub_sweep) scrub_.sweep(cfg_.scrub_sweep);
  const auto done = scrub_.repair(step, now_seconds() - t_start_);
  repairs_.insert(repairs_.end(), done.begin(), done.end());
  if (!done.empty() && net_.rank() == 0)
    std::cerr << "ec-train: step " << step << ": scrub repaired " << done.size() << " row(s) (first: stripe " << done.front().stripe << " member "
              << done.front().member << " row " << done.front().row << ", " << done.front().kind << ")\n";
}

void Engine::total_scrub() {
  if (!cfg_.scrub) return;
  const auto& s = scrub_.stats();
  std::vector<double> v{static_cast<double>(s.rows_checked), s.check_s, s.repair_s};
  net_.allreduce_sum_ordered(v);
  scrub_total_ = s;
  scrub_total_.rows_checked = static_cast<std::uint64_t>(v[0]);
  scrub_total_.check_s = v[1] / net_.size();  // per rank, on average
  scrub_total_.repair_s = v[2] / net_.size();
}

}  // namespace resil::ecrm
