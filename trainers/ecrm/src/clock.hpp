// The protocol's timeline clock: seconds on the steady clock, for the report's phase times.
#pragma once

#include <chrono>

namespace resil::ecrm {

inline double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace resil::ecrm
