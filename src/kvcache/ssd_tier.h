// SsdTier: the cold tier of the prefix KV cache. Blocks live on disk, one
// content-addressed file per block:
//
//   <dir>/<first two hex digits of the hash>/<64 hex digits of the hash>.kvb
//
// A file is a fixed-size header followed by the block's bytes (the payload).
// The header is little-endian:
//
//   offset size  field
//        0    8  magic "LLMUXKVB"
//        8    4  format version (kSsdFormatVersion)
//       12    4  header size (kSsdHeaderSize)
//       16   32  block hash (must equal the file name)
//       48   32  model fingerprint
//       80    4  token count
//       84    4  layer count
//       88    4  K cache type (ggml type id)
//       92    4  V cache type (ggml type id)
//       96    8  payload size (file size = header size + payload size)
//      104    8  XXH3-64 of the payload
//      112    8  XXH3-64 of header bytes [0, 112)
//
// Writing. Exactly one writer thread creates and evicts files: it writes
// header and payload to "<final>.tmp-<pid>-<n>" (O_EXCL), closes it, renames
// it to the final name (so a file under a final name is always complete) and
// stamps its mtime. There is no fdatasync: on the development machine (ext4
// on virtio) writing a 3 MB block took 0.7-1.0 ms without it and 2.5-5.9 ms
// with it. A process crash loses nothing (the page cache survives it); after a
// power loss a file may be torn, and the payload checksum turns that into a
// miss and a removal, never wrong output. Before each write the writer evicts least-recently-used files
// until the new one fits `max_bytes`; the sum of file sizes never exceeds it.
//
// Write errors never throw. ENOSPC, EDQUOT, EIO and EFBIG stop writes: the
// temp file is removed, write_errors is counted, and blocks are dropped
// (counted) until `write_retry_interval` has passed; then one write is tried
// again, and if it succeeds writes resume. Reads keep working throughout.
//
// LRU order survives a restart: a write and every hit stamp the file's mtime
// with a strictly increasing nanosecond time (the realtime clock, or the last
// stamp + 1 ns when the clock has not moved on: the kernel's own file times
// are only as fine as its tick). Open() sorts the files by mtime (ties by
// name) and so rebuilds the order.
//
// Validation. Open() checks each file's header, name and size; Read() checks
// the header, the model fingerprint and the payload checksum. A file that
// fails is removed and counted in corrupt_removed; a read of it is a miss.
//
// Thread-safety: every method is thread-safe. Reads run concurrently with
// each other and with the writer (a read of a file being evicted either
// misses or returns the complete old bytes). Clear() holds the tier's lock
// while it deletes, so other calls wait for it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "kvcache/block.h"

namespace llmux::kv {

inline constexpr uint32_t kSsdFormatVersion = 2;
inline constexpr uint32_t kSsdHeaderSize = 120;

struct SsdTierOptions {
  std::string dir;         // created (with parents) if missing
  uint64_t max_bytes = 0;  // cap on the sum of block file sizes; 0 = the tier is off (Open succeeds, stores nothing)
  size_t queue_capacity = 64;  // blocks waiting for the writer (at least 1)
  // After a write fails for lack of space, how long writes stay stopped before one is tried again.
  std::chrono::milliseconds write_retry_interval{60'000};
};

struct SsdTierStats {
  uint64_t entries = 0, bytes = 0;        // files in the index and their total size
  uint64_t hits = 0, misses = 0;          // Read() results
  uint64_t writes = 0, write_errors = 0;  // files written / failed (ENOSPC, EIO, ...)
  uint64_t dropped = 0;                   // blocks not written: queue full, writes stopped, too big, or shutdown
  uint64_t evictions = 0;                 // files removed to stay under max_bytes
  uint64_t corrupt_removed = 0;           // bad, truncated or foreign files removed (at start-up or on read)
  size_t queue_depth = 0;                 // blocks queued, and the one being written
  bool writes_stopped = false;            // after ENOSPC and the like, until a retry succeeds
};

struct SsdClearResult {
  uint64_t files_deleted = 0, bytes_deleted = 0;
};

class SsdTier {
 public:
  // Creates the directory, rebuilds the index by scanning it (each block
  // file's header, name and size; payload checksums are checked on read),
  // removes and counts block-named files that are not valid files of this
  // format and stray temp files (files with other names are left alone),
  // orders the index by mtime, evicts down to max_bytes and starts the writer
  // thread. With max_bytes 0 the tier is off: it touches nothing on disk.
  // Null + `error` only when the directory cannot be created or listed.
  static std::unique_ptr<SsdTier> Open(const SsdTierOptions& options, std::string* error);
  // Writes what is queued (for at most kShutdownFlush), then stops and joins
  // the writer; blocks still queued then are dropped.
  ~SsdTier();

  SsdTier(const SsdTier&) = delete;
  SsdTier& operator=(const SsdTier&) = delete;

  // Queues a block for writing; never blocks. False when the tier is off, the
  // buffer is empty, the block is already on disk or queued, or (counted as
  // dropped) the queue is full, writes are stopped or the file would be
  // larger than max_bytes. The buffer must not change afterwards.
  bool Enqueue(const BlockMeta& meta, std::shared_ptr<const BlockBuffer> bytes);
  // Like Enqueue, but waits until `deadline` for room in the queue (the shutdown flush).
  bool EnqueueUntil(const BlockMeta& meta, std::shared_ptr<const BlockBuffer> bytes,
                    std::chrono::steady_clock::time_point deadline);
  // Waits until everything queued so far has been written (or dropped), or
  // `deadline`. True if the queue drained.
  bool Flush(std::chrono::steady_clock::time_point deadline);

  // The payload of block `hash` of model `model`, or nullopt on a miss. A
  // file that does not validate (or belongs to another model: the hash is
  // chained over the model, so it can never be valid) is removed, counted in
  // corrupt_removed and reported as a miss. A hit makes the block the
  // most recently used.
  std::optional<BlockBuffer> Read(const Hash& hash, const Hash& model);
  bool Contains(const Hash& hash) const;  // on disk or queued
  // Cancels queued writes, waits for the one in progress, and deletes every
  // indexed block file.
  SsdClearResult Clear();
  SsdTierStats stats() const;
  const std::string& dir() const { return options_.dir; }

  static constexpr std::chrono::seconds kShutdownFlush{5};

 private:
  struct HashKey {
    size_t operator()(const Hash& h) const;
  };
  struct Entry {
    uint64_t size = 0;
    std::list<Hash>::iterator lru;  // position in lru_
  };
  struct Pending {
    BlockMeta meta;
    std::shared_ptr<const BlockBuffer> bytes;
  };

  explicit SsdTier(SsdTierOptions options);
  bool Scan(std::string* error);
  void WriterLoop();
  void WriteBlock(const Pending& block);
  bool EnqueueLocked(const BlockMeta& meta, std::shared_ptr<const BlockBuffer> bytes);
  bool WritesStoppedLocked() const;
  // The next mtime stamp, strictly after every earlier one (ns since the epoch).
  int64_t NextStampLocked();
  void InsertLocked(const Hash& hash, uint64_t size);  // as the most recently used
  void EraseLocked(const Hash& hash);
  // Removes the file `fd` was opened from (if `path` still names it) and its entry; counts it as corrupt.
  void RemoveCorruptLocked(int fd, const std::string& path, const Hash& hash);
  std::string PathFor(const Hash& hash) const;

  const SsdTierOptions options_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;     // writer: queue non-empty or stopping
  std::condition_variable progress_cv_;  // room in the queue, a write finished
  std::unordered_map<Hash, Entry, HashKey> index_;  // guarded by mu_
  std::list<Hash> lru_;                              // front = least recently used; guarded by mu_
  std::deque<Pending> queue_;                        // guarded by mu_
  std::unordered_set<Hash, HashKey> queued_;         // queue_ and the block being written; guarded by mu_
  bool writing_ = false;                             // guarded by mu_
  int clearing_ = 0;                                 // Clear() calls in progress (the writer waits); guarded by mu_
  bool stop_ = false;                                // guarded by mu_
  int64_t last_stamp_ = 0;                           // guarded by mu_
  std::chrono::steady_clock::time_point retry_at_;   // guarded by mu_; meaningful while stats_.writes_stopped
  uint64_t temp_counter_ = 0;                        // writer thread only
  SsdTierStats stats_;                               // guarded by mu_ (entries and queue_depth filled in by stats())
  std::thread writer_;
};

}  // namespace llmux::kv
