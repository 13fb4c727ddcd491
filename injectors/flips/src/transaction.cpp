// The injection transaction: log durable, apply, footer (transaction.hpp).
#include "resil/inject/transaction.hpp"

#include <system_error>

#include "resil/ckpt/hash.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/file_set.hpp"
#include "resil/inject/storage.hpp"

namespace resil::inject {

namespace {

template <class Apply>
TransactionResult logged(const std::filesystem::path& log, const LogHeader& header, std::span<const FlipRecord> records,
                         const std::string& path, Format format, const TransactionOptions& opt, Apply&& apply_records) {
  LogWriter w(log, path);  // nothing of this run exists before it
  try {
    w.line(header_line(header));
    w.records(records);
    // Crash safety: every record is durable before the first byte of the file changes.
    w.sync();
    TransactionResult r;
    r.stats = apply_records();
    if (opt.hash_output) r.output_hash = checkpoint_hash(path, header.hash);
    w.line(footer_line(r.stats.changed, r.output_hash, header.hash));
    w.close();
    return r;
  } catch (const Error& e) {
    // A log of flips the file does not hold (the staged copy could not be created, the log's disk
    // filled up) would tell a script they were made: it goes, no output of a failed run remains.
    // Where some may be applied it is the undo record: kept, and the message says so.
    bool unapplied = false;
    try {
      unapplied = holds_old_bits(path, records, format);
    } catch (const Error&) {
    }
    if (!unapplied) e.rethrow_with(std::string(e.what()) + "; the flip log " + log.string() + " is kept: " + path +
                                   " may hold some of its flips (ckpt-flip revert undoes them)");
    std::error_code ec;
    std::filesystem::remove(log, ec);
    throw;
  }
}

}  // namespace

TransactionResult apply_logged(const std::filesystem::path& log, const LogHeader& header, std::span<const FlipRecord> records,
                               const std::string& file, const TransactionOptions& opt) {
  return logged(log, header, records, file, opt.format, opt, [&] { return apply(file, records, Direction::forward, false, true, opt.sync, opt.format); });
}

TransactionResult apply_logged(const std::filesystem::path& log, const LogHeader& header, std::span<const FlipRecord> records, Storage& file,
                               const TransactionOptions& opt) {
  const std::string path = file.path();  // apply closes the Storage
  return logged(log, header, records, path, file.format(), opt, [&] { return apply(file, records, Direction::forward); });
}

}  // namespace resil::inject
