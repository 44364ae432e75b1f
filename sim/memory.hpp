#pragma once
/// The kernel's big memory, on transparent huge pages (madvise(MADV_HUGEPAGE): in effect where
/// /sys/kernel/mm/transparent_hugepage/enabled is `madvise` or `always`; elsewhere ordinary pages, which work
/// the same). In a world of 100,000 processes every event touches a cold process's stack, Process, message
/// slot and table entries, each on a 4 KiB page of its own, and the TLB misses were a good part of the time
/// (bench/README.md). Here: the big 64-byte-aligned arrays (World::LineAligned: the message slab and the
/// dense per-process tables), and the StackArena of WorldOptions::huge_page_stacks. Only sim/world.hpp and
/// sim/world.cpp use it; a file of its own, because GCC's inlining in world.cpp is sensitive to that unit's
/// size (with this code in it, it stopped inlining EventQueue::top(); see there).
#include <cstddef>
#include <map>
#include <utility>
#include <vector>

namespace locksim {

/// `bytes` of memory on a 64-byte boundary. From 512 KiB up, a mapping of its own, 2 MiB-aligned, rounded up
/// to whole huge pages and marked MADV_HUGEPAGE (at most 2 MiB more than asked, and only in big worlds).
/// Throws std::bad_alloc.
void* allocate_lines(std::size_t bytes);
/// Frees what allocate_lines(bytes) gave.
void free_lines(void* p, std::size_t bytes) noexcept;

/// Fiber stacks for WorldOptions::huge_page_stacks: carved one after another out of 2 MiB-aligned chunks
/// marked MADV_HUGEPAGE, so that one TLB entry covers over a hundred small stacks. A freed stack is kept for
/// the next one of its size (a restart). The world's Processes come from it too (allocate_object).
class StackArena {
 public:
  static constexpr std::size_t kHuge = std::size_t{2} << 20;    ///< a huge page (and a chunk's alignment)
  static constexpr std::size_t kChunk = std::size_t{64} << 20;  ///< a chunk: 32 huge pages
  /// Added to every block. The pages are physically contiguous now, so stacks of a round size would put
  /// every stack's hot top into the same few cache sets (the malloc'ed stacks' cache colour is for the same
  /// reason, but it grows the blocks by up to 63 KiB, and here every byte of a block is resident).
  static constexpr std::size_t kColour = 1024;

  StackArena() = default;
  StackArena(const StackArena&) = delete;
  StackArena& operator=(const StackArena&) = delete;
  ~StackArena();

  /// The block that holds a stack of `size` bytes (all of it usable stack).
  static std::size_t block_for(std::size_t size) { return ((size + 63) & ~std::size_t{63}) + kColour; }
  /// A block of `block` bytes, 64-byte aligned; throws std::bad_alloc when the system has no more.
  char* allocate(std::size_t block);
  /// Gives a block back for the next allocation of the same size (it stays mapped until the arena goes).
  void release(char* p, std::size_t block) noexcept;

  /// Memory for an object of `size` bytes, aligned to `align` (at most 64), from chunks of its own: the
  /// Processes of a world with huge-page stacks, dense and on huge pages too (1-3% less user time at 100,000
  /// clients, two side-by-side pairs). Given back only with the arena.
  void* allocate_object(std::size_t size, std::size_t align);

  /// A fiber stack of at least `size` bytes: from `arena` when there is one, else malloc'ed with `colour`
  /// bytes more (World::stack_colour). Returns its lowest address and sets `block` to its whole size. Out of
  /// line, for the same reason as this file.
  static char* allocate_stack(StackArena* arena, std::size_t size, std::size_t colour, std::size_t& block);
  /// Frees what allocate_stack gave.
  static void free_stack(StackArena* arena, char* base, std::size_t block) noexcept;

 private:
  /// A new 2 MiB-aligned chunk of at least `size` bytes, marked MADV_HUGEPAGE; returns its base and sets
  /// `left` to its size.
  char* new_chunk(std::size_t size, std::size_t& left);

  std::vector<std::pair<char*, std::size_t>> chunks_;  // base, size: unmapped with the arena
  char* next_ = nullptr;                               // stacks
  std::size_t left_ = 0;
  char* object_next_ = nullptr;  // objects
  std::size_t object_left_ = 0;
  std::map<std::size_t, std::vector<char*>> free_;  // by block size
};

}  // namespace locksim
