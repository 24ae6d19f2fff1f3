// How much of the current thread's stack is left: the parser and the evaluator recurse, and
// their frames are several times bigger in sanitizer builds, so besides counting depth they
// stop while a reserve is still free, on whatever thread (and stack size) they run.
#pragma once

#include <pthread.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace lumen::tpl {

class StackFloor {
 public:
  // Recursion stops with this much stack left (or half the stack, if that is less); deep value
  // printing and comparison run below it.
  static constexpr size_t kReserveBytes = 1u << 20;

  // Computed once per thread: for the main thread glibc reads /proc/self/maps to answer.
  StackFloor() {
    thread_local const uintptr_t floor = compute();
    floor_ = floor;
  }

  // True once the caller's frame is below the floor (stacks grow down on every target lumen
  // builds for).
  bool reached() const { return reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) < floor_; }

 private:
  uintptr_t floor_ = 0;

  static uintptr_t compute() {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
    void* low = nullptr;
    size_t size = 0;
    uintptr_t floor = 0;
    if (pthread_attr_getstack(&attr, &low, &size) == 0 && low)
      floor = reinterpret_cast<uintptr_t>(low) + std::min(kReserveBytes, size / 2);
    pthread_attr_destroy(&attr);
    return floor;
  }
};

}  // namespace lumen::tpl
