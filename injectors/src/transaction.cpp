// The injection transaction: log durable, apply, footer (transaction.hpp).
#include "resil/inject/transaction.hpp"

#include "resil/ckpt/hash.hpp"
#include "resil/inject/storage.hpp"

namespace resil::inject {

namespace {

template <class Apply>
TransactionResult logged(const std::filesystem::path& log, const LogHeader& header, std::span<const FlipRecord> records,
                         const std::string& path, const TransactionOptions& opt, Apply&& apply_records) {
  LogWriter w(log);
  w.line(header_line(header));
  w.records(records);
  // Crash safety: every record is durable before the first byte of the file changes.
  w.sync();
  TransactionResult r;
  r.stats = apply_records();
  if (opt.hash_output) r.output_sha256 = ckpt::sha256_file(path);
  w.line(footer_line(r.stats.changed, r.output_sha256));
  w.close();
  return r;
}

}  // namespace

TransactionResult apply_logged(const std::filesystem::path& log, const LogHeader& header, std::span<const FlipRecord> records,
                               const std::string& file, const TransactionOptions& opt) {
  return logged(log, header, records, file, opt, [&] { return apply(file, records, Direction::forward, false, true, opt.sync, opt.format); });
}

TransactionResult apply_logged(const std::filesystem::path& log, const LogHeader& header, std::span<const FlipRecord> records, Storage& file,
                               const TransactionOptions& opt) {
  const std::string path = file.path();  // apply closes the Storage
  return logged(log, header, records, path, opt, [&] { return apply(file, records, Direction::forward); });
}

}  // namespace resil::inject
