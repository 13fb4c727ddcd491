#include "resil/ecrm/segment.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "node_segments.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/core/error.hpp"

namespace resil::ecrm {

using detail::shm_name;
using detail::user_name;

namespace {
constexpr char magic[8] = {'R', 'E', 'S', 'I', 'L', 'E', 'C', '\0'};
constexpr std::size_t page = 4096;
constexpr std::int64_t no_base = -2;  // an undo record or slot that matches no commit

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// "--k 4 (this run: 2), --ft ec (this run: none)": the settings two identities' texts disagree on;
// empty when either text is missing or not a JSON object (a segment cut short, or both equal).
std::string settings_diff(const std::string& theirs, const std::string& ours) {
  const auto a = nlohmann::json::parse(theirs, nullptr, false), b = nlohmann::json::parse(ours, nullptr, false);
  if (!a.is_object() || !b.is_object()) return {};
  std::string out;
  // A setting one side does not record was its default there (a segment made before the option).
  auto text = [](const nlohmann::json& x, bool has) {
    return !has ? std::string("(default)") : x.is_string() && !x.get<std::string>().empty() ? x.get<std::string>() : x.is_null() || x.is_string() ? std::string("(none)") : x.dump();
  };
  auto keys = b;
  keys.update(a);  // every setting either side names
  for (const auto& [k, unused] : keys.items()) {
    if (a.contains(k) && b.contains(k) && a.at(k) == b.at(k)) continue;
    out += (out.empty() ? "" : ", ") + k + " " + text(a.value(k, nlohmann::json()), a.contains(k)) + " (this run: " + text(b.value(k, nlohmann::json()), b.contains(k)) + ")";
  }
  return out;
}

// Keeps the compiler from moving a store across it. The hardware needs no fence: a killed
// process loses none of the stores it executed, they are in the shared page already.
void order() noexcept { std::atomic_signal_fence(std::memory_order_seq_cst); }

struct CommitRec {
  std::uint64_t seq;  // 0: invalid
  std::int64_t step;
  std::uint32_t slot, cur_undo;
  std::uint64_t wall_ns, sum;
};
struct UndoHead {
  std::int64_t base;  // the committed step this record rolls back to
  std::uint64_t used;
};
struct SlotHead {
  std::int64_t step;
  std::uint64_t len, sum, pad;
};

std::uint64_t rec_sum(const CommitRec& r) {
  return ckpt::xxh64(std::as_bytes(std::span(&r, 1)).first(offsetof(CommitRec, sum)), 0x5EC0);
}
std::uint64_t slot_sum(std::int64_t step, std::span<const std::byte> body) {
  return ckpt::xxh64(body, static_cast<std::uint64_t>(step) * 0x9E3779B97F4A7C15ull + body.size());
}
std::uint64_t wall_ns() {
  using namespace std::chrono;
  return static_cast<std::uint64_t>(duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count());
}
std::string mode_text(mode_t m) {
  char b[8];
  std::snprintf(b, sizeof b, "0%03o", static_cast<unsigned>(m & 0777));
  return b;
}

// /dev/shm is shared by every user of the node and a job id is predictable (the same command gives
// the same one): a segment this run did not make for itself could hand it another user's state, or
// let someone else read and change this job's state while it runs. Only a segment owned by this
// user and open to no one else is attached. IoError naming the owner and mode otherwise.
void require_private(const struct stat& st, const std::string& p, const std::string& job) {
  if (st.st_uid != ::geteuid())
    throw IoError(p + ": owned by " + user_name(st.st_uid) + ", not by this user (" + user_name(::geteuid()) +
                  "): another user's segment is never attached; use another --job-id");
  if ((st.st_mode & 077) != 0)
    throw IoError(p + ": mode " + mode_text(st.st_mode) + " lets group or others read or write this job's state (owner " + user_name(st.st_uid) +
                  "): not attached; remove it with ec-train --cleanup --job-id " + job + " or use another --job-id");
}

// The owner of an existing segment this user could not open or create.
[[noreturn]] void refuse_unopenable(const std::string& p, const std::string& what, int err, const std::string& job) {
  struct stat st{};
  if (::stat(p.c_str(), &st) == 0) require_private(st, p, job);
  throw IoError(p + ": " + what + ": " + std::strerror(err));
}

// Another process (the previous launch's rank, being killed) may still hold the segment for a
// moment after mpiexec returned.
void lock_or_throw(int fd, const std::string& path) {
  for (int i = 0; i < 300; ++i) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return;
    if (errno != EWOULDBLOCK && errno != EINTR) throw IoError(path + ": cannot lock: " + std::strerror(errno));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw IoError(path + ": in use by another running process (another job with the same --job-id?)");
}
}  // namespace

struct Segment::Header {
  char magic[8];
  std::uint32_t version, pad0;
  std::uint64_t config_hash, seed;
  std::int32_t rank, world;
  std::uint64_t store_bytes, undo_bytes, slot_bytes, log_entries, total_bytes;
  CommitRec rec[2];
  UndoHead undo[2];
  std::uint64_t kills_fired;
};

std::optional<std::uint64_t> Segment::peek_seed(const std::string& job, int rank) {
  Fd fd(::shm_open(shm_name(job, rank).c_str(), O_RDONLY, 0));
  if (!fd) return std::nullopt;
  // Only from a segment attach() would take (it refuses the others with their owner).
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) return std::nullopt;
  Header h{};
  if (::pread(fd.get(), &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) || std::memcmp(h.magic, magic, sizeof magic) != 0) return std::nullopt;
  return h.seed;
}

namespace {
struct Offsets {
  std::size_t store, undo[2], slot[2], log, total;
};
Offsets offsets(const SegmentLayout& l) {
  Offsets o{};
  o.store = page;
  o.undo[0] = o.store + round_up(l.store_bytes, page);
  o.undo[1] = o.undo[0] + round_up(l.undo_bytes, page);
  o.slot[0] = o.undo[1] + round_up(l.undo_bytes, page);
  o.slot[1] = o.slot[0] + round_up(sizeof(SlotHead) + l.slot_bytes, page);
  o.log = o.slot[1] + round_up(sizeof(SlotHead) + l.slot_bytes, page);
  o.total = o.log + round_up(l.log_entries * sizeof(LogEntry), page);
  return o;
}
}  // namespace

Segment Segment::open_mapped(const std::string& path, Fd fd, const SegmentLayout& lay) {
  const auto o = offsets(lay);
  Segment s;
  s.path_ = path;
  s.map_ = Mapping::map(fd.get(), o.total, PROT_READ | PROT_WRITE, MAP_SHARED);
  if (!s.map_) throw IoError(path + ": cannot map " + std::to_string(o.total) + " bytes: " + std::strerror(errno));
  s.fd_ = std::move(fd);
  s.store_off_ = o.store;
  s.undo_off_[0] = o.undo[0];
  s.undo_off_[1] = o.undo[1];
  s.slot_off_[0] = o.slot[0];
  s.slot_off_[1] = o.slot[1];
  s.log_off_ = o.log;
  s.undo_bytes_ = lay.undo_bytes;
  s.slot_bytes_ = lay.slot_bytes;
  s.log_entries_ = lay.log_entries;
  return s;
}

std::optional<Segment> Segment::attach(const std::string& job, const SegmentIdentity& id, const SegmentLayout& lay) {
  const auto p = path(job, id.rank);
  Fd fd(::shm_open(shm_name(job, id.rank).c_str(), O_RDWR, 0));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    refuse_unopenable(p, "cannot open", errno, job);
  }
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) throw IoError(p + ": " + std::strerror(errno));
  require_private(st, p, job);  // before anything of it is read, or its lock taken
  lock_or_throw(fd.get(), p);
  Header h{};
  if (static_cast<std::size_t>(st.st_size) < page || ::pread(fd.get(), &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) ||
      std::memcmp(h.magic, magic, sizeof magic) != 0)
    throw CorruptInputError(p + ": not an ec-train state segment (bad magic); remove it or run ec-train --cleanup --job-id " + job);
  if (h.version != version)
    throw MismatchError(p + ": segment format version " + std::to_string(h.version) + ", this ec-train reads version " + std::to_string(version));
  if (h.rank != id.rank || h.world != id.world || h.config_hash != id.config_hash) {
    std::string theirs(page - sizeof(Header), '\0');
    const ssize_t n = ::pread(fd.get(), theirs.data(), theirs.size(), sizeof(Header));
    theirs.resize(n > 0 ? std::strlen(theirs.c_str()) : 0);
    std::string diff = h.world != id.world ? "ranks " + std::to_string(h.world) + " (this run: " + std::to_string(id.world) + ")" : "";
    if (const auto d = settings_diff(theirs, id.settings); !d.empty()) diff += (diff.empty() ? "" : ", ") + d;
    if (diff.empty())
      diff = "config hash " + ckpt::hex_u64(h.config_hash) + " (this run: " + ckpt::hex_u64(id.config_hash) + "), rank " + std::to_string(h.rank) +
             " (this run: " + std::to_string(id.rank) + ")";
    throw MismatchError(p + ": segment of another job configuration: " + diff + "; use another --job-id or ec-train --cleanup --job-id " + job);
  }
  const auto o = offsets(lay);
  // The timeline log is sized by --steps, which the config hash leaves out (a relaunch may train
  // longer): another --steps is another job's segment, not a damaged one.
  if (h.log_entries != lay.log_entries && h.store_bytes == lay.store_bytes)
    throw MismatchError(p + ": segment of a run with another --steps (its timeline holds " + std::to_string(h.log_entries) + " entries, this run's " +
                        std::to_string(lay.log_entries) + "); run with the --steps it was made with, or ec-train --cleanup --job-id " + job);
  if (h.store_bytes != lay.store_bytes || h.undo_bytes != lay.undo_bytes || h.slot_bytes != lay.slot_bytes || h.log_entries != lay.log_entries ||
      h.total_bytes != o.total || static_cast<std::size_t>(st.st_size) != o.total)
    throw CorruptInputError(p + ": segment layout does not match its configuration (truncated or damaged)");
  auto s = open_mapped(p, std::move(fd), lay);
  return s;
}

Segment Segment::create(const std::string& job, const SegmentIdentity& id, const SegmentLayout& lay) {
  const auto p = path(job, id.rank);
  ::shm_unlink(shm_name(job, id.rank).c_str());
  Fd fd(::shm_open(shm_name(job, id.rank).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600));
  if (!fd) refuse_unopenable(p, "cannot create", errno, job);  // a file another user put there names its owner
  lock_or_throw(fd.get(), p);
  const auto o = offsets(lay);
  if (::ftruncate(fd.get(), static_cast<off_t>(o.total)) != 0) {
    const int e = errno;
    ::shm_unlink(shm_name(job, id.rank).c_str());
    throw IoError(p + ": cannot size to " + std::to_string(o.total) + " bytes: " + std::strerror(e));
  }
  Segment s;
  try {
    s = open_mapped(p, std::move(fd), lay);  // fails under an address-space limit (ulimit -v) below the segment
  } catch (...) {
    ::shm_unlink(shm_name(job, id.rank).c_str());  // a segment that never held state is not left behind
    throw;
  }
  auto& h = s.head();
  h.version = version;
  h.config_hash = id.config_hash;
  h.seed = id.seed;
  h.rank = id.rank;
  h.world = id.world;
  h.store_bytes = lay.store_bytes;
  h.undo_bytes = lay.undo_bytes;
  h.slot_bytes = lay.slot_bytes;
  h.log_entries = lay.log_entries;
  h.total_bytes = o.total;
  const std::size_t room = page - sizeof(Header) - 1;
  if (id.settings.size() <= room) std::memcpy(s.map_.data() + sizeof(Header), id.settings.data(), id.settings.size());  // else none: never half a text
  s.invalidate();
  order();
  std::memcpy(h.magic, magic, sizeof magic);  // last: a half-made segment is refused
  return s;
}

Segment::Header& Segment::head() const noexcept {
  static_assert(sizeof(Header) <= page);
  return *reinterpret_cast<Header*>(map_.data());
}
std::byte* Segment::undo_area(unsigned i) const noexcept { return map_.data() + undo_off_[i]; }
std::byte* Segment::slot_area(unsigned i) const noexcept { return map_.data() + slot_off_[i]; }
std::span<std::byte> Segment::store() const noexcept { return {map_.data() + store_off_, head().store_bytes}; }

namespace {
// The newest commit record whose checksum holds (a torn write leaves the other one standing).
const CommitRec* best(const CommitRec (&rec)[2]) {
  const CommitRec* b = nullptr;
  for (const auto& r : rec)
    if (r.seq != 0 && r.sum == rec_sum(r) && r.slot < 2 && r.cur_undo < 2 && (!b || r.seq > b->seq)) b = &r;
  return b;
}
bool slot_ok(const std::byte* area, std::size_t cap, std::int64_t step) {
  SlotHead sh;
  std::memcpy(&sh, area, sizeof sh);
  return sh.step == step && sh.len <= cap && sh.sum == slot_sum(step, {area + sizeof(SlotHead), sh.len});
}
}  // namespace

std::optional<Segment::Committed> Segment::committed() const noexcept {
  const auto* r = best(head().rec);
  if (!r || !slot_ok(slot_area(r->slot), slot_bytes_, r->step)) return std::nullopt;
  return Committed{r->step, r->wall_ns};
}

std::span<const std::byte> Segment::small_state() const {
  const auto* r = best(head().rec);
  if (!r) throw EcError(path_ + ": no committed state");
  SlotHead sh;
  std::memcpy(&sh, slot_area(r->slot), sizeof sh);
  return {slot_area(r->slot) + sizeof(SlotHead), sh.len};
}

void Segment::commit(std::int64_t step, std::span<const std::byte> small) {
  commit(step, small.size(), [&](std::byte* to) { std::memcpy(to, small.data(), small.size()); });
}

void Segment::commit(std::int64_t step, std::size_t size, const std::function<void(std::byte*)>& write) {
  if (size > slot_bytes_) throw EcError(path_ + ": small state of " + std::to_string(size) + " bytes exceeds its slot (" + std::to_string(slot_bytes_) + ")");
  auto& h = head();
  const auto* r = best(h.rec);
  if (r && r->step == step) return;
  const unsigned slot = r ? 1 - r->slot : 0;
  // 1. The small state into the slot the commit record does not name.
  std::byte* a = slot_area(slot);
  write(a + sizeof(SlotHead));
  order();
  const SlotHead sh{step, size, slot_sum(step, {a + sizeof(SlotHead), size}), 0};
  std::memcpy(a, &sh, sizeof sh);
  order();
  // 2. The commit record, over the older of the two: from here on `step` is the committed state.
  CommitRec n{r ? r->seq + 1 : std::max(h.rec[0].seq, h.rec[1].seq) + 1, step, slot, r ? 1 - r->cur_undo : 0u, wall_ns(), 0};
  n.sum = rec_sum(n);
  CommitRec& dst = r == &h.rec[0] ? h.rec[1] : h.rec[0];
  dst = n;
  order();
  // 3. The older undo record becomes the current one: emptied first, then given its new base
  // (until then its base names no commit, so its stale entries are never replayed).
  h.undo[n.cur_undo].used = 0;
  order();
  h.undo[n.cur_undo].base = step;
  order();
}

void Segment::save(std::span<const std::byte> range) {
  auto& h = head();
  const auto* r = best(h.rec);
  if (!r) return;  // nothing committed: the state counts as lost anyway
  auto& u = h.undo[r->cur_undo];
  if (u.base != r->step) return;  // cannot happen after commit(); a stale record stays unused
  const auto st = store();
  if (range.data() < st.data() || range.data() + range.size() > st.data() + st.size())
    throw EcError(path_ + ": undo of bytes outside the store");
  const std::uint64_t off = static_cast<std::uint64_t>(range.data() - st.data()), len = range.size();
  const std::size_t need = 2 * sizeof(std::uint64_t) + round_up(range.size(), 8);
  if (u.used + need > undo_bytes_) throw EcError(path_ + ": undo record full (" + std::to_string(undo_bytes_) + " bytes)");
  std::byte* e = undo_area(r->cur_undo) + u.used;
  std::memcpy(e, &off, sizeof off);
  std::memcpy(e + sizeof off, &len, sizeof len);
  std::memcpy(e + 2 * sizeof off, range.data(), range.size());
  order();
  u.used += need;  // the entry counts only once complete, and before the caller overwrites
  order();
}

void Segment::replay(unsigned area) noexcept {
  const auto& u = head().undo[area];
  const std::byte* a = undo_area(area);
  std::vector<std::size_t> at;
  for (std::size_t p = 0; p + 16 <= u.used;) {
    std::uint64_t len;
    std::memcpy(&len, a + p + 8, sizeof len);
    at.push_back(p);
    p += 16 + round_up(len, 8);
  }
  const auto st = store();
  // Newest first: each byte ends with the value it had when the record's base was committed.
  for (auto it = at.rbegin(); it != at.rend(); ++it) {
    std::uint64_t off, len;
    std::memcpy(&off, a + *it, sizeof off);
    std::memcpy(&len, a + *it + 8, sizeof len);
    if (off + len <= st.size()) std::memcpy(st.data() + off, a + *it + 16, len);
  }
}

bool Segment::can_roll_back_to(std::int64_t target) const noexcept {
  const auto& h = head();
  const auto* r = best(h.rec);
  if (!r || !slot_ok(slot_area(r->slot), slot_bytes_, r->step)) return false;
  if (r->step == target) return true;
  return r->step == target + 1 && h.undo[1 - r->cur_undo].base == target && slot_ok(slot_area(1 - r->slot), slot_bytes_, target);
}

void Segment::rollback_to(std::int64_t target) {
  if (!can_roll_back_to(target)) throw EcError(path_ + ": cannot roll back to step " + std::to_string(target));
  auto& h = head();
  const unsigned bi = best(h.rec) == &h.rec[0] ? 0 : 1;
  const CommitRec r = h.rec[bi];
  const unsigned cur = r.cur_undo, prev = 1 - cur;
  if (h.undo[cur].base == r.step) replay(cur);
  if (r.step == target) {
    order();
    h.undo[cur].used = 0;
    order();
    return;
  }
  replay(prev);
  order();
  // The store is as of `target` again: commit it (the slot of `target` is intact), then empty.
  CommitRec n{r.seq + 1, target, 1 - r.slot, prev, r.wall_ns, 0};
  n.sum = rec_sum(n);
  h.rec[1 - bi] = n;
  order();
  h.undo[prev].used = 0;
  h.undo[cur].base = no_base;
  h.undo[cur].used = 0;
  order();
}

void Segment::invalidate() noexcept {
  auto& h = head();
  // The older record first: at no moment does a record stand whose undo no longer fits the store.
  const unsigned newer = h.rec[1].seq > h.rec[0].seq ? 1 : 0;
  h.rec[1 - newer].seq = 0;
  order();
  h.rec[newer].seq = 0;
  order();
  for (unsigned i = 0; i < 2; ++i) {
    h.undo[i].base = no_base;
    h.undo[i].used = 0;
    const SlotHead sh{no_base, 0, 0, 0};
    std::memcpy(slot_area(i), &sh, sizeof sh);
  }
  order();
}

std::size_t Segment::undo_used() const noexcept {
  const auto* r = best(head().rec);
  return r ? head().undo[r->cur_undo].used : 0;
}

std::size_t Segment::log_capacity() const noexcept { return log_entries_; }
void Segment::log_put(std::size_t i, const LogEntry& e) noexcept {
  if (i < log_entries_) std::memcpy(map_.data() + log_off_ + i * sizeof(LogEntry), &e, sizeof e);
}
LogEntry Segment::log_get(std::size_t i) const noexcept {
  LogEntry e{};
  if (i < log_entries_) std::memcpy(&e, map_.data() + log_off_ + i * sizeof(LogEntry), sizeof e);
  return e;
}
std::uint64_t Segment::kills_fired() const noexcept { return head().kills_fired; }
void Segment::set_kills_fired(std::uint64_t mask) noexcept { head().kills_fired = mask; }

}  // namespace resil::ecrm
