#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "resil/core/fd.hpp"
#include "resil_test/tmpdir.hpp"

namespace {
bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }
}  // namespace

TEST_CASE("Fd closes its descriptor exactly once, also when an exception unwinds", "[core][unit]") {
  int raw = -1;
  {
    resil::Fd f{::open("/dev/null", O_RDONLY | O_CLOEXEC)};
    REQUIRE(f);
    raw = f.get();
    REQUIRE(is_open(raw));
  }
  CHECK_FALSE(is_open(raw));

  try {
    resil::Fd f{::open("/dev/null", O_RDONLY | O_CLOEXEC)};
    raw = f.get();
    throw std::runtime_error("fault model threw");
  } catch (const std::runtime_error&) {
  }
  CHECK_FALSE(is_open(raw));
}

TEST_CASE("Fd moves ownership; release hands it over; close reports", "[core][unit]") {
  resil::Fd a{::open("/dev/null", O_RDONLY | O_CLOEXEC)};
  const int raw = a.get();
  resil::Fd b = std::move(a);
  CHECK_FALSE(a);
  CHECK(b.get() == raw);
  resil::Fd c{::open("/dev/null", O_RDONLY | O_CLOEXEC)};
  const int other = c.get();
  c = std::move(b);  // closes c's own descriptor
  CHECK_FALSE(is_open(other));
  CHECK(c.get() == raw);
  const int released = c.release();
  CHECK_FALSE(c);
  CHECK(is_open(released));
  resil::Fd d{released};
  CHECK(d.close() == 0);
  CHECK_FALSE(is_open(released));
  CHECK(d.close() == 0);  // closing an empty Fd is a no-op
}

TEST_CASE("Mapping maps a file's bytes and unmaps them", "[core][unit]") {
  resil::test::TempDir dir{"core-fd"};
  const auto path = dir.path() / "m.bin";
  resil::Fd f{::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)};
  REQUIRE(f);
  REQUIRE(::ftruncate(f.get(), 8192) == 0);
  std::byte* p = nullptr;
  {
    auto m = resil::Mapping::map(f.get(), 8192, PROT_READ | PROT_WRITE, MAP_SHARED);
    REQUIRE(m);
    CHECK(m.size() == 8192);
    std::memcpy(m.data() + 4096, "resil", 5);
    p = m.data();
    auto moved = std::move(m);
    CHECK_FALSE(m);
    CHECK(moved.data() == p);
  }
  // Unmapped: mincore on the old range fails with ENOMEM.
  unsigned char vec[2];
  CHECK(::mincore(p, 8192, vec) == -1);
  CHECK(errno == ENOMEM);
  char back[5];
  REQUIRE(::pread(f.get(), back, 5, 4096) == 5);
  CHECK(std::memcmp(back, "resil", 5) == 0);
  // A zero length or a bad descriptor gives an empty mapping, not a crash.
  CHECK_FALSE(resil::Mapping::map(f.get(), 0, PROT_READ, MAP_SHARED));
  CHECK_FALSE(resil::Mapping::map(-1, 4096, PROT_READ, MAP_SHARED));
}
