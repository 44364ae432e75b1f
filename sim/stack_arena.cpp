#include "sim/stack_arena.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace locksim {

StackArena::~StackArena() {
  for (const auto& [base, size] : chunks_) munmap(base, size);
}

char* StackArena::allocate(std::size_t block) {
  if (auto it = free_.find(block); it != free_.end() && !it->second.empty()) {
    char* p = it->second.back();
    it->second.pop_back();
    return p;
  }
  if (block > left_) next_ = new_chunk(block, left_);
  char* p = next_;
  next_ += block;
  left_ -= block;
  return p;
}

void* StackArena::allocate_object(std::size_t size, std::size_t align) {
  const std::size_t skip =
      static_cast<std::size_t>(-reinterpret_cast<std::uintptr_t>(object_next_)) & (align - 1);
  if (skip + size > object_left_) {
    object_next_ = new_chunk(size, object_left_);
    return allocate_object(size, align);
  }
  char* p = object_next_ + skip;
  object_next_ = p + size;
  object_left_ -= skip + size;
  return p;
}

void StackArena::release(char* p, std::size_t block) noexcept {
  try {
    free_[block].push_back(p);
  } catch (...) {  // no memory to remember it: it is unmapped with its chunk all the same
  }
}

char* StackArena::allocate_stack(StackArena* arena, std::size_t size, std::size_t colour,
                                 std::size_t& block) {
  if (arena) {
    block = block_for(size);
    return arena->allocate(block);
  }
  block = size + colour;
  void* p = std::malloc(block);
  if (!p) throw std::bad_alloc();
  return static_cast<char*>(p);
}

void StackArena::free_stack(StackArena* arena, char* base, std::size_t block) noexcept {
  if (arena)
    arena->release(base, block);
  else
    std::free(base);
}

char* StackArena::new_chunk(std::size_t want, std::size_t& left) {
  const std::size_t size = std::max(kChunk, (want + kHuge - 1) & ~(kHuge - 1));
  // Map one huge page more and trim, for a 2 MiB-aligned chunk (a huge page needs the alignment).
  void* raw =
      mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto addr = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (addr + kHuge - 1) & ~(std::uintptr_t{kHuge} - 1);
  if (aligned > addr) munmap(raw, aligned - addr);
  if (const std::uintptr_t end = addr + size + kHuge; end > aligned + size)
    munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  char* base = reinterpret_cast<char*>(aligned);
  // A hint: where transparent huge pages are off (`never`) these stay ordinary pages, and still work.
  madvise(base, size, MADV_HUGEPAGE);
  chunks_.emplace_back(base, size);
  left = size;
  return base;
}

}  // namespace locksim
