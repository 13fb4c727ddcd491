// apply(): records -> file, per word chain, block by block, so each touched chunk is read and written once. In place, HDF5 is only
// ever opened read-only: raw data at known offsets is changed with pwrite, and edits that only
// HDF5 can make (filtered or unallocated chunks) go through a staged copy decided up front.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <unordered_map>

#include "resil/core/fd.hpp"
#include "resil/ckpt/fs.hpp"
#include "resil/ckpt/hash.hpp"
#include "resil/inject/apply.hpp"
#include "resil/inject/file_lock.hpp"
#include "resil/inject/file_set.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/sampling.hpp"
#include "resil/inject/storage.hpp"

namespace resil::inject {

namespace {

std::string site_name(const FlipRecord& r) {
  return r.raw ? "byte " + std::to_string(r.index) : "dataset " + r.dataset + " element " + std::to_string(r.index);
}

// One word's records in log order; decides the word's bits after applying/reverting them.
std::uint64_t resolve(std::span<const FlipRecord* const> chain, std::uint64_t w, Direction dir, bool force,
                      const std::string& file, ApplyStats& st) {
  const FlipRecord& first = *chain.front();
  const FlipRecord& last = *chain.back();
  const unsigned width = first.width;
  if (dir == Direction::forward) {
    if (w == first.old_bits) {
      if (w != last.new_bits) ++st.changed;
      else ++st.unchanged;
      return last.new_bits;
    }
    if (w == last.new_bits) {
      ++st.unchanged;
      return w;
    }
    if (!force)
      throw MismatchError(file + ": " + site_name(first) + ": found bits " + hex_bits(w, width) + ", the log expects " +
                          hex_bits(first.old_bits, width) + " (not the file the log was made from? --force overrides)");
    ++st.changed;
    return last.new_bits;
  }
  if (w == first.old_bits) {
    ++st.unchanged;
    return w;
  }
  bool known = false;
  for (const auto* r : chain) known = known || w == r->new_bits;
  if (!known && !force)
    throw MismatchError(file + ": " + site_name(first) + ": found bits " + hex_bits(w, width) +
                        ", which no record of the log produced (--force overrides)");
  ++st.changed;
  return first.old_bits;
}

ApplyStats apply_raw(const std::string& file, std::span<const FlipRecord> records, Direction dir, bool force) {
  std::map<std::uint64_t, std::vector<const FlipRecord*>> chains;
  for (const auto& r : records) chains[r.index].push_back(&r);
  const Fd fd{::open(file.c_str(), O_RDWR | O_CLOEXEC)};
  if (!fd) throw IoError(file + ": cannot open for writing: " + std::strerror(errno));
  ApplyStats st;
  // Every byte is checked before the first is written: a mismatch leaves the file as it was.
  std::vector<std::pair<std::uint64_t, unsigned char>> writes;
  for (const auto& [off, chain] : chains) {
    unsigned char b = 0;
    if (::pread(fd.get(), &b, 1, static_cast<off_t>(off)) != 1)
      throw MismatchError(file + ": byte " + std::to_string(off) + " is beyond the end of the file");
    ++st.words;
    const auto nb = static_cast<unsigned char>(resolve(chain, b, dir, force, file, st));
    if (nb != b) writes.emplace_back(off, nb);
  }
  for (const auto& [off, nb] : writes)
    if (::pwrite(fd.get(), &nb, 1, static_cast<off_t>(off)) != 1) throw IoError(file + ": write failed: " + std::strerror(errno));
  if (::fsync(fd.get()) != 0) throw IoError(file + ": fsync failed: " + std::strerror(errno));
  return st;
}

// One dataset's records by element: element idx[i] (ascending, unique) has the chain
// recs[start[i] .. start[i + 1]) in log order. Sorted arrays rather than maps of vectors: 10,000
// records made 20,000 allocations, and every word's chain was a tree lookup.
struct DatasetChains {
  const std::string* dataset = nullptr;
  std::vector<std::uint64_t> idx;
  std::vector<std::size_t> start;
  std::vector<const FlipRecord*> recs;
  std::span<const FlipRecord* const> at(std::uint64_t index) const {
    const auto it = std::lower_bound(idx.begin(), idx.end(), index);
    if (it == idx.end() || *it != index) throw std::logic_error("apply: an edit visited an element no record names");
    const auto i = static_cast<std::size_t>(it - idx.begin());
    return std::span<const FlipRecord* const>(recs).subspan(start[i], start[i + 1] - start[i]);
  }
};
using Chains = std::vector<DatasetChains>;  // by dataset path

// Dataset records grouped by dataset (in path order) and element (in log order).
Chains chains_of(std::span<const FlipRecord> records) {
  std::map<std::string_view, std::uint32_t> ids;  // dataset path -> id, in path order
  for (const auto& r : records) {
    if (r.raw) throw CorruptInputError("flip log mixes raw and dataset records");
    ids.emplace(r.dataset, 0);
  }
  Chains chains(ids.size());
  std::uint32_t next = 0;
  for (auto& [name, id] : ids) id = next++;
  struct Key {
    std::uint32_t dataset;
    std::uint64_t index;
    std::size_t seq;
  };
  std::vector<Key> keys;
  keys.reserve(records.size());
  std::uint32_t last_id = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    if (i == 0 || r.dataset != records[i - 1].dataset) last_id = ids.find(r.dataset)->second;  // records come grouped
    keys.push_back({last_id, r.index, i});
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return a.dataset != b.dataset ? a.dataset < b.dataset : a.index != b.index ? a.index < b.index : a.seq < b.seq;
  });
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto& c = chains[keys[i].dataset];
    if (!c.dataset) c.dataset = &records[keys[i].seq].dataset;
    if (c.idx.empty() || c.idx.back() != keys[i].index) {
      c.idx.push_back(keys[i].index);
      c.start.push_back(c.recs.size());
    }
    c.recs.push_back(&records[keys[i].seq]);
  }
  for (auto& c : chains) c.start.push_back(c.recs.size());
  return chains;
}

void check_width(Storage& wf, const std::string& file, const std::string& dataset, const FlipRecord& r) {
  const unsigned width = wf.width_of(dataset);
  if (width != r.width)
    throw MismatchError(file + ": dataset " + dataset + " stores " + std::to_string(width) + "-bit words, the log has " +
                        std::to_string(r.width) + "-bit records");
}

// A record's N-d index, where the log has one, is the element its flat index names in the file's shape:
// a hand-edited "nd" (or a log of another shape's tensor) would otherwise be applied at "index" while
// the log and every report name another element. Exit 7, nothing changed.
void check_nd(Storage& wf, const Chains& chains) {
  const bool any = std::any_of(chains.begin(), chains.end(), [](const DatasetChains& c) {
    return std::any_of(c.recs.begin(), c.recs.end(), [](const FlipRecord* r) { return !r->nd.empty(); });
  });
  if (!any) return;
  std::unordered_map<std::string, ckpt::Shape> shapes;
  for (const auto& t : wf.tensors()) {
    for (const auto& a : t.info.aliases) shapes.emplace(a, t.info.shape);
    shapes.emplace(t.info.path, t.info.shape);
  }
  for (const auto& c : chains) {
    const auto it = shapes.find(*c.dataset);
    if (it == shapes.end()) continue;  // edit() names the missing tensor
    const auto& shape = it->second;
    for (const FlipRecord* r : c.recs) {
      if (r->nd.empty()) continue;
      bool same = r->nd.size() == shape.size();
      std::uint64_t flat = 0;
      for (std::size_t d = 0; same && d < shape.size(); ++d) {
        same = r->nd[d] < shape[d];
        flat = flat * shape[d] + r->nd[d];  // < numel <= 2^64 - 1 while every coordinate is inside
      }
      if (!same || flat != r->index)
        throw MismatchError(wf.path() + ": dataset " + *c.dataset + ": the log's element " + ckpt::shape_string(r->nd) +
                            " is not its flat index " + std::to_string(r->index) + " in shape " + ckpt::shape_string(shape) +
                            " (log edited, or of another file)");
    }
  }
}

// Datasets whose elements live in external raw files (HDF5 external storage) are never edited:
// those files are not part of the HDF5 file, so an -o copy would share them with its input (HDF5
// writes them through, wherever it resolves their names) and an in-place edit could be neither
// staged nor undone by a rename. Refused before any byte changes (docs/design/ckpt-flip-io.md).
void refuse_external_storage(Storage& wf, const Chains& chains) {
  for (const auto& c : chains)
    if (const auto why = wf.unwritable(*c.dataset); !why.empty())
      throw CorruptInputError(wf.path() + ": dataset " + *c.dataset + " " + why +
                              ": ckpt-flip never edits external storage (the log names it; nothing was changed)");
}

// The read-only probe of an in-place edit, before any byte changes: whether applying the chains
// changes a word that only HDF5 can write (then the edit is staged: a copy is edited and renamed
// over the file, all or nothing). If not, every other word is checked against its chain here too,
// so that a mismatch (exit 7) leaves the file as it was rather than with the datasets before it
// already changed (docs/reference/exit-codes.md). That is one more read of the touched words only: words
// read with pread are kept by the storage, the others are loads from its mapping.
bool needs_staging(Storage& wf, const Chains& chains, Direction dir, bool force) {
  // The first word that would change decides: stop reading (and decompressing) there. The staged
  // edit checks every remaining word on the copy, so a mismatch still leaves the file untouched.
  struct Decided {};
  ApplyStats scratch;
  std::vector<std::vector<std::uint64_t>> at_offsets(chains.size());  // per dataset: the words an in-place edit writes
  try {
    for (std::size_t d = 0; d < chains.size(); ++d) {
      const auto& c = chains[d];
      check_width(wf, wf.path(), *c.dataset, *c.recs.front());
      auto only = wf.staged_only(*c.dataset, c.idx);
      std::set_difference(c.idx.begin(), c.idx.end(), only.begin(), only.end(), std::back_inserter(at_offsets[d]));
      wf.edit(*c.dataset, std::move(only), [&](std::span<const std::uint64_t> i, std::span<std::uint64_t> w) {
        for (std::size_t k = 0; k < i.size(); ++k)
          if (resolve(c.at(i[k]), w[k], dir, force, wf.path(), scratch) != w[k]) throw Decided{};
      });
    }
  } catch (const Decided&) {
    return true;
  }
  if (force) return false;  // every word is written whatever it holds: nothing to check
  for (std::size_t d = 0; d < chains.size(); ++d) {
    const auto& c = chains[d];
    wf.edit(*c.dataset, std::move(at_offsets[d]), [&](std::span<const std::uint64_t> i, std::span<const std::uint64_t> w) {
      for (std::size_t k = 0; k < i.size(); ++k) resolve(c.at(i[k]), w[k], dir, false, wf.path(), scratch);
    });
  }
  return false;
}

ApplyStats apply_words(Storage& wf, const Chains& chains, Direction dir, bool force) {
  ApplyStats st;
  for (const auto& c : chains) {
    check_width(wf, wf.path(), *c.dataset, *c.recs.front());
    st.words += c.idx.size();
    wf.edit(*c.dataset, c.idx, [&](std::span<const std::uint64_t> i, std::span<std::uint64_t> w) {
      for (std::size_t k = 0; k < i.size(); ++k) w[k] = resolve(c.at(i[k]), w[k], dir, force, wf.path(), st);
    });
  }
  wf.finish();
  wf.close();
  return st;
}

// Temporaries of `file` (ckpt::fs::temp_sibling) whose process is gone, removed; their paths.
std::vector<std::string> remove_stale_temporaries(const std::string& file) {
  namespace stdfs = std::filesystem;
  const stdfs::path p(file);
  const std::string prefix = "." + p.filename().string() + ".tmp.";  // ckpt::fs::temp_sibling
  const stdfs::path dir = p.parent_path().empty() ? stdfs::path(".") : p.parent_path();
  std::vector<std::string> removed;
  struct stat fst {};
  const uid_t owner = ::stat(file.c_str(), &fst) == 0 ? fst.st_uid : ::geteuid();
  std::error_code ec;
  for (stdfs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const char* first = name.data() + prefix.size();
    const char* last = name.data() + name.size();
    pid_t pid = 0;
    const auto [ptr, err] = std::from_chars(first, last, pid);
    if (err != std::errc() || ptr != last || *first == '+' || *first == '-' || pid <= 0 || pid == ::getpid()) continue;
    // Alive, or alive under another user (EPERM): its temporary is in use, or at least not ours to judge.
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    // Anything but a lone regular file of this user or of the file's owner at that name is someone else's, and stays.
    if (!ckpt::fs::lone_file_of(it->path(), owner)) continue;
    std::error_code fec;
    if (stdfs::remove(it->path(), fec)) removed.push_back(it->path().string());
  }
  return removed;
}

void print_removed(const std::vector<std::string>& removed) {
  for (const auto& t : removed) std::cout << "removed stale temporary " << t << " (its process is gone)\n";
}

}  // namespace

void require_logged_format(const std::string& file, const LogHeader& header, const std::string& log, Format format) {
  if (header.raw || header.file_format.empty()) return;
  const auto actual = format_name(resolve_format(file, format));
  if (actual == header.file_format) return;
  // A file its own format's parser refuses is that error (exit 4), as without the log's field.
  open_storage(file, Access::read, format)->close();
  throw MismatchError(file + ": a " + std::string(actual) + " file, but the flip log " + log + " was made from a " +
                      header.file_format + " file (not the file the log was made from?)");
}

void require_logged_identity(const std::string& file, const FlipLog& log, const std::string& log_path) {
  const auto& h = log.header;
  if (h.hash == ckpt::FileHash::none || !log.complete) return;
  const std::string& out = log.footer_output_hash.empty() ? h.output_hash : log.footer_output_hash;
  if (h.input_hash.empty() && out.empty()) return;
  const auto now = checkpoint_hash(file, h.hash);
  if (now == h.input_hash || now == out) return;
  throw MismatchError(file + ": its " + std::string(ckpt::file_hash_name(h.hash)) + " hash is neither the input's nor the output's in the flip log " +
                      log_path + " (not the file the log was made from, or changed since; --force skips this check)");
}

bool holds_old_bits(const std::string& file, std::span<const FlipRecord> records, Format format) {
  if (records.empty()) return true;
  if (records.front().raw) {
    std::map<std::uint64_t, std::uint64_t> old;  // byte offset -> its first record's old bits
    for (const auto& r : records) old.emplace(r.index, r.old_bits);
    const Fd fd{::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
    if (!fd) throw IoError(file + ": cannot open for reading: " + std::strerror(errno));
    for (const auto& [off, bits] : old) {
      unsigned char b = 0;
      if (::pread(fd.get(), &b, 1, static_cast<off_t>(off)) != 1 || b != bits) return false;
    }
    return true;
  }
  const auto rf = open_storage(file, Access::read, format);
  bool old = true;
  for (const auto& c : chains_of(records)) {
    rf->edit(*c.dataset, c.idx, [&](std::span<const std::uint64_t> i, std::span<std::uint64_t> w) {
      for (std::size_t k = 0; k < i.size() && old; ++k) old = w[k] == c.at(i[k]).front()->old_bits;
    });
    if (!old) break;
  }
  rf->close();
  return old;
}

ApplyStats apply(const std::string& file, std::span<const FlipRecord> records, Direction dir, bool force, bool crash_safe,
                 bool sync, Format format) {
  if (records.empty()) return {};
  // One in-place run per file: held from before the file is opened until the edit is complete.
  std::optional<InPlaceLock> hold;
  if (crash_safe) hold.emplace(file);
  if (records.front().raw) {
    if (crash_safe) print_removed(remove_stale_temporaries(file));
    return apply_raw(file, records, dir, force);
  }
  // In place, HDF5 is opened read-only: raw data at known offsets changes, nothing else.
  const auto wf = open_storage(file, crash_safe ? Access::in_place : Access::rewrite, format);
  wf->set_sync(sync);
  return apply(*wf, records, dir, force);
}

ApplyStats apply(Storage& wf, std::span<const FlipRecord> records, Direction dir, bool force) {
  const std::string file = wf.path();
  if (wf.access() == Access::read) throw UsageError(file + ": apply needs a file opened for writing");
  const bool crash_safe = wf.access() == Access::in_place;
  // Held already when the caller took the file before opening it (inject --in-place, apply(path)).
  std::optional<InPlaceLock> hold;
  if (crash_safe) hold.emplace(file);
  if (records.empty()) {
    wf.close();
    return {};
  }
  const Chains chains = records.front().raw ? Chains{} : chains_of(records);
  refuse_external_storage(wf, chains);
  check_nd(wf, chains);
  // A staged edit renames a copy onto the file itself: through a symbolic link that would replace
  // the link by a file and leave its target unchanged. Temporaries sit next to the target too.
  std::string target = file;
  if (crash_safe) {
    std::error_code ec;
    const auto real = std::filesystem::canonical(file, ec);
    if (!ec) target = real.string();
  }
  // Killed staged runs leave a temporary copy the size of the file: reclaim it before staging again.
  if (crash_safe) print_removed(remove_stale_temporaries(target));
  if (records.front().raw) {
    wf.close();
    return apply_raw(file, records, dir, force);
  }
  if (!crash_safe || !needs_staging(wf, chains, dir, force)) return apply_words(wf, chains, dir, force);
  wf.close();
  // HDF5 allocates unallocated chunks and may relocate a rewritten filtered chunk, updating its
  // metadata later; only a copy is opened read-write, so such edits stage the whole file.
  const auto tmp = ckpt::fs::temp_sibling(target);
  // Removed on error: this user's file at the name (a copy that failed midway), or once made, the
  // copy itself, whoever owns it then (keep_owner_and_mode gives it the file's owner); never what
  // someone else put at the name.
  ckpt::fs::RemoveOnError guard(tmp);
  try {
    ckpt::fs::copy_file(target, tmp);
    guard.adopt();
  } catch (const Error& e) {
    // Named as what it is: "FILE: cannot create" would read as if the file itself could not be
    // created (a directory the user may not write, say, beside a file the user may).
    rethrow_renamed(e, tmp.string(), file + ": its staged copy " + tmp.string());
  }
  // The copy replaces the file: it gets the file's owner, group and mode first (a private 0600
  // checkpoint stays private), or the edit is refused before anything changed.
  try {
    ckpt::fs::keep_owner_and_mode(target, tmp);
  } catch (const Error& e) {
    rethrow_renamed(e, target, file);
  }
  ApplyStats st;
  try {
    st = apply(tmp.string(), records, dir, force, false, true, wf.format());
    ckpt::fs::durable_rename(tmp, target);
  } catch (const Error& e) {
    rethrow_renamed(e, tmp.string(), file);  // the user knows the file, not its staged copy
  }
  guard.keep();
  return st;
}

}  // namespace resil::inject
