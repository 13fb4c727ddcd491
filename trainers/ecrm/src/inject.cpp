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

// `bits` distinct bit positions of a 32-bit word among the selected ones (`allowed`, ascending),
// the first the anchor. With every bit selected: the same draws as a plain shuffle of 0..31.
std::vector<int> draw_bits(Draws& d, const std::vector<int>& allowed, int bits) {
  std::vector<int> all = allowed;
  const auto n = all.size();
  for (std::size_t i = 0; i < static_cast<std::size_t>(bits); ++i) std::swap(all[i], all[i + d.next(n - i)]);
  return {all.begin(), all.begin() + bits};
}

// The fault on the 32-bit word at `w`: `bits` flipped, or the fault model's new word when one is
// given (its anchor bits.front()); the record's word fields, as ckpt-flip's flip log has them.
void fault_word(std::byte* w, const std::vector<int>& bits, const Config& cfg, Rng& rng, bool is_float, nlohmann::json& rec) {
  std::uint32_t old;
  std::memcpy(&old, w, sizeof old);
  std::uint32_t now = old;
  if (cfg.inject_fault && bits.size() == 1) {
    now = cfg.inject_fault(old, static_cast<unsigned>(bits.front()), cfg.inject_allowed, rng);
  } else {
    for (int b : bits) now ^= std::uint32_t{1} << b;
  }
  std::memcpy(w, &now, sizeof now);
  const std::uint32_t mask = old ^ now;
  std::vector<int> set;
  for (int b = 0; b < 32; ++b)
    if (mask >> b & 1u) set.push_back(b);
  rec["dtype"] = is_float ? "f32" : "u32";
  rec["anchor"] = bits.front();
  rec["bits"] = set;
  rec["mask"] = hex32(mask);
  rec["old"] = hex32(old);
  rec["new"] = hex32(now);
  rec["old_value"] = is_float ? value_json(old) : nlohmann::json(old);
  rec["new_value"] = is_float ? value_json(now) : nlohmann::json(now);
  if (bits.size() > 1) rec["model"] = "random-bits:" + std::to_string(bits.size());
}
}  // namespace

void FlipLogTally::add(const std::string& dataset, std::uint64_t index, const std::string& old_bits, const std::string& new_bits) {
  const auto [it, first] = words.try_emplace({dataset, index}, old_bits, new_bits);
  if (!first) it->second.second = new_bits;
}

std::uint64_t FlipLogTally::words_changed() const {
  std::uint64_t n = 0;
  for (const auto& [at, w] : words) n += w.first != w.second;
  return n;
}

void FlipLogTally::read(const std::filesystem::path& log) {
  std::uintmax_t complete = 0;  // bytes up to the end of the last whole line
  {
    std::ifstream in(log, std::ios::binary);
    std::string line;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // no newline after it: cut by a kill, not a whole record
      complete += line.size() + 1;
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || j.value("type", "") != "flip") continue;
      ++records;
      add(j.at("dataset").get<std::string>(), j.at("index").get<std::uint64_t>(), j.at("old").get<std::string>(), j.at("new").get<std::string>());
    }
  }
  // The relaunch appends after the last whole line: a cut one would otherwise swallow its first record.
  std::error_code ec;
  if (const auto size = std::filesystem::file_size(log, ec); !ec && size > complete) std::filesystem::resize_file(log, complete, ec);
  if (ec) throw Error(log.string() + ": cannot drop the line a kill cut short: " + ec.message());
}

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
  std::vector<int> allowed;  // --inject-bits: the bits the anchor is drawn from
  for (int b = 0; b < 32; ++b)
    if (cfg_.inject_allowed >> b & 1u) allowed.push_back(b);
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
      const std::uint64_t s = f.stripe >= 0 ? static_cast<std::uint64_t>(f.stripe) : d.next(lay.stripes());
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
    for (std::size_t si = 0; si < sites.size(); ++si) {
      const auto& site = sites[si];
      const auto bits = draw_bits(d, allowed, f.bits);
      const std::uint64_t pick = Rng::at(d.key, d.item, d.n++);  // the MLP / Adam element, drawn on every rank alike
      if (site.rank != me) continue;
      // The fault model's own draws (random-bits, burst, random-value, pattern): a stream per site.
      Rng model_rng(derive_seed(d.key, 0x40DE1ull + i), si);
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
        const bool data_row = site.member < k;
        if (data_row) {
          // The table row: fragment q = (stripe - first) * k + member, row = q * B + row.
          const std::uint64_t q = (site.stripe - lay.first_stripe(tb)) * static_cast<std::uint64_t>(k) + static_cast<std::uint64_t>(site.member);
          const std::uint64_t table_row = q * lay.rows_per_fragment() + site.row;
          rec["dataset"] = "/embedding/table" + std::to_string(tb) + (site.word < half ? "/weight" : "/adagrad");
          rec["index"] = table_row * half + site.word % half;
          rec["nd"] = {table_row, site.word % half};
          rec["padding"] = table_row >= lay.table(tb).rows;
        } else {
          // The table's parity as [stripe of the table, parity member, row, word]: bytes of GF(2^8)
          // code words, logged as 32-bit words (u32).
          const std::uint64_t st = site.stripe - lay.first_stripe(tb), pm = static_cast<std::uint64_t>(site.member - k);
          rec["dataset"] = "/parity/table" + std::to_string(tb);
          rec["index"] = ((st * static_cast<std::uint64_t>(lay.n() - k) + pm) * lay.rows_per_fragment() + site.row) * (rb / 4) + site.word;
          rec["nd"] = {st, pm, site.row, site.word};
        }
        rec["stripe"] = site.stripe;
        rec["member"] = site.member;
        rec["member_row"] = site.row;
        fault_word(bytes.data() + std::size_t{site.word} * 4, bits, cfg_, model_rng, data_row, rec);
      } else {
        // A parameter of the rank's replica, or one of its Adam slots; the element drawn over all
        // of them. Each rank holds its own copy: the dataset names the rank.
        std::vector<std::pair<std::string, train::Tensor*>> tensors;
        const std::string replica = "/rank" + std::to_string(me);
        if (f.target == InjectTarget::mlp) {
          for (auto& p : net_model_.params()) tensors.emplace_back(replica + "/model/" + p.name, p.value);
        } else {
          for (auto& [param, slots] : opt_.slots())
            for (auto& [name, tensor] : slots) tensors.emplace_back(replica + "/optimizer/" + param + "/" + name, &tensor);
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
          // The N-d index in C order.
          std::vector<std::uint64_t> nd(tt->dims().size());
          std::uint64_t rest = at;
          for (std::size_t q = nd.size(); q-- > 0;) {
            const auto extent = static_cast<std::uint64_t>(tt->dims()[q]);
            nd[q] = extent ? rest % extent : 0;
            rest = extent ? rest / extent : 0;
          }
          if (!nd.empty()) rec["nd"] = nd;
          fault_word(reinterpret_cast<std::byte*>(h.data() + at), bits, cfg_, model_rng, true, rec);
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
    for (std::size_t pos = 0; pos < text.size();) {
      const auto nl = text.find('\n', pos);
      auto j = nlohmann::json::parse(text.substr(pos, nl - pos));
      // Numbered in application order over the whole run (a relaunch continues the numbers).
      j["seq"] = log_tally_.records++;
      log_tally_.add(j["dataset"].get<std::string>(), j["index"].get<std::uint64_t>(), j["old"].get<std::string>(), j["new"].get<std::string>());
      if (log) log << j.dump() << "\n";
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

std::vector<ScrubRepair> Engine::full_scrub(std::int64_t step) {
  scrub_step_ = step;
  scrub_.sweep(store_.layout().stripes());
  auto done = scrub_.repair(step, now_seconds() - t_start_);
  repairs_.insert(repairs_.end(), done.begin(), done.end());
  return done;
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
