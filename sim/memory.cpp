#include "locksim/sim/memory.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace locksim {

namespace {
constexpr std::size_t kBig = std::size_t{512} << 10;
std::size_t whole_huge_pages(std::size_t bytes) {
  return (bytes + StackArena::kHuge - 1) & ~(StackArena::kHuge - 1);
}

/// A 2 MiB-aligned mapping of `size` bytes (a multiple of 2 MiB), marked MADV_HUGEPAGE: map one huge page
/// more and trim (a huge page needs the alignment).
char* map_huge(std::size_t size, int flags) {
  constexpr std::size_t kHuge = StackArena::kHuge;
  void* raw = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto addr = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (addr + kHuge - 1) & ~(std::uintptr_t{kHuge} - 1);
  if (aligned > addr) munmap(raw, aligned - addr);
  if (const std::uintptr_t end = addr + size + kHuge; end > aligned + size)
    munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  char* base = reinterpret_cast<char*>(aligned);
  madvise(base, size, MADV_HUGEPAGE);  // a hint: where THP is off these stay ordinary pages
  return base;
}
}  // namespace

void* allocate_lines(std::size_t bytes) {
  if (bytes < kBig) return ::operator new (bytes, std::align_val_t{64});
  return map_huge(whole_huge_pages(bytes), 0);
}

void free_lines(void* p, std::size_t bytes) noexcept {
  if (bytes < kBig)
    ::operator delete (p, std::align_val_t{64});
  else
    munmap(p, whole_huge_pages(bytes));
}

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
  const std::size_t size = std::max(kChunk, whole_huge_pages(want));
  char* base = map_huge(size, MAP_NORESERVE);
  chunks_.emplace_back(base, size);
  left = size;
  return base;
}

}  // namespace locksim
