#pragma once
/// Fiber stacks for WorldOptions::huge_page_stacks: carved one after another out of 2 MiB-aligned chunks
/// marked MADV_HUGEPAGE, so that one TLB entry covers over a hundred small stacks. In a world of 100,000
/// processes each resume of a cold process otherwise misses the TLB on its own stack page. A freed stack is
/// kept for the next one of its size (a restart). Only sim/world.cpp uses it, through allocate_stack and
/// free_stack, which also do the malloc'ed kind: in a file of their own, because GCC's inlining in world.cpp
/// is sensitive to that unit's size (with this code in it, it stopped inlining EventQueue::top(); see there).
#include <cstddef>
#include <map>
#include <utility>
#include <vector>

namespace locksim {

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
  /// Processes of a world with huge-page stacks, dense and on huge pages too (with the stacks on huge pages,
  /// the Processes' own pages were the next TLB misses: 7-12% of user time at 100,000 clients). Given back
  /// only with the arena.
  void* allocate_object(std::size_t size, std::size_t align);

  /// A fiber stack of at least `size` bytes: from `arena` when there is one, else malloc'ed with `colour`
  /// bytes more (World::stack_colour). Returns its lowest address and sets `block` to its whole size. Out of
  /// line, for the same reason as the arena's own file.
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
