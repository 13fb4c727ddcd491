#pragma once
// SharedText: an immutable string shared by its copies. A flip record's location is one text per
// chunk or shard, not per flip: records copy a pointer, not ~150 bytes on the heap.
#include <memory>
#include <string>
#include <string_view>

namespace resil::inject {

class SharedText {
public:
  SharedText() = default;
  SharedText(std::string s)  // NOLINT(google-explicit-constructor): a string converts, as to std::string
      : p_(s.empty() ? nullptr : std::make_shared<const std::string>(std::move(s))) {}
  bool empty() const noexcept { return !p_; }
  std::size_t size() const noexcept { return p_ ? p_->size() : 0; }
  const std::string& str() const noexcept {
    static const std::string none;
    return p_ ? *p_ : none;
  }
  operator std::string_view() const noexcept { return str(); }  // NOLINT(google-explicit-constructor)
  friend bool operator==(const SharedText& a, const SharedText& b) noexcept { return a.str() == b.str(); }

private:
  std::shared_ptr<const std::string> p_;
};

}  // namespace resil::inject
