#include "kvcache/ssd_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <tuple>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace llmux::kv {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kMagic[8] = {'L', 'L', 'M', 'U', 'X', 'K', 'V', 'B'};
constexpr const char* kSuffix = ".kvb";
constexpr const char* kTempMarker = ".kvb.tmp-";
constexpr size_t kHexLength = 64;
constexpr size_t kShardLength = 2;  // hex digits of the subdirectory name
constexpr mode_t kDirMode = 0755;
constexpr mode_t kFileMode = 0644;
constexpr int64_t kNanosPerSecond = 1'000'000'000;

// Header field offsets (see ssd_tier.h).
constexpr size_t kOffVersion = 8;
constexpr size_t kOffHeaderSize = 12;
constexpr size_t kOffHash = 16;
constexpr size_t kOffModel = 48;
constexpr size_t kOffTokens = 80;
constexpr size_t kOffLayers = 84;
constexpr size_t kOffKType = 88;
constexpr size_t kOffVType = 92;
constexpr size_t kOffPayloadSize = 96;
constexpr size_t kOffPayloadXxh = 104;
constexpr size_t kOffHeaderXxh = 112;
static_assert(kOffHeaderXxh + sizeof(uint64_t) == kSsdHeaderSize);

using HeaderBytes = std::array<uint8_t, kSsdHeaderSize>;

struct Header {
  Hash hash{};
  Hash model{};
  uint64_t payload_size = 0;
  uint64_t payload_xxh = 0;
};

void PutU32(uint8_t* p, uint32_t v) {
  for (size_t i = 0; i < sizeof(v); ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU64(uint8_t* p, uint64_t v) {
  for (size_t i = 0; i < sizeof(v); ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (size_t i = 0; i < sizeof(v); ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(v); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

HeaderBytes EncodeHeader(const BlockMeta& meta, const BlockBuffer& payload) {
  HeaderBytes h{};
  std::memcpy(h.data(), kMagic, sizeof(kMagic));
  PutU32(&h[kOffVersion], kSsdFormatVersion);
  PutU32(&h[kOffHeaderSize], kSsdHeaderSize);
  std::memcpy(&h[kOffHash], meta.hash.data(), meta.hash.size());
  std::memcpy(&h[kOffModel], meta.model.data(), meta.model.size());
  PutU32(&h[kOffTokens], meta.token_count);
  PutU32(&h[kOffLayers], meta.layer_count);
  PutU32(&h[kOffKType], meta.k_type);
  PutU32(&h[kOffVType], meta.v_type);
  PutU64(&h[kOffPayloadSize], payload.size());
  PutU64(&h[kOffPayloadXxh], XXH3_64bits(payload.data(), payload.size()));
  PutU64(&h[kOffHeaderXxh], XXH3_64bits(h.data(), kOffHeaderXxh));
  return h;
}

// False unless magic, version, header size and header checksum are right.
bool DecodeHeader(const HeaderBytes& h, Header* out) {
  if (std::memcmp(h.data(), kMagic, sizeof(kMagic)) != 0 || GetU32(&h[kOffVersion]) != kSsdFormatVersion ||
      GetU32(&h[kOffHeaderSize]) != kSsdHeaderSize ||
      GetU64(&h[kOffHeaderXxh]) != XXH3_64bits(h.data(), kOffHeaderXxh)) {
    return false;
  }
  std::memcpy(out->hash.data(), &h[kOffHash], out->hash.size());
  std::memcpy(out->model.data(), &h[kOffModel], out->model.size());
  out->payload_size = GetU64(&h[kOffPayloadSize]);
  out->payload_xxh = GetU64(&h[kOffPayloadXxh]);
  return true;
}

bool WriteAll(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, uint8_t* data, size_t size, off_t offset) {
  while (size > 0) {
    const ssize_t n = pread(fd, data, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return true;
}

// Errors that mean the disk (or the quota, or the file size limit) is full or failing.
bool IsSpaceError(int err) { return err == ENOSPC || err == EDQUOT || err == EIO || err == EFBIG; }

struct DirEntry {
  std::string name;
  bool is_dir = false;
};

// The entries of `path` other than "." and "..". False if it cannot be listed.
bool ListDir(const std::string& path, std::vector<DirEntry>* out) {
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return false;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st {};
      is_dir = lstat((path + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    }
    out->push_back({name, is_dir});
  }
  closedir(d);
  return true;
}

bool IsLowerHex(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The hash in "<64 hex>" + rest, if `name` starts with 64 lower-case hex digits followed by `rest`.
std::optional<Hash> HashPrefix(const std::string& name, const std::string& rest, bool rest_is_prefix) {
  if (name.size() < kHexLength + rest.size() || name.compare(kHexLength, rest.size(), rest) != 0) return std::nullopt;
  if (!rest_is_prefix && name.size() != kHexLength + rest.size()) return std::nullopt;
  const std::string hex = name.substr(0, kHexLength);
  Hash hash;
  if (!IsLowerHex(hex) || !FromHex(hex, &hash)) return std::nullopt;
  return hash;
}

int64_t RealtimeNanos() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
}

timespec ToTimespec(int64_t nanos) {
  return timespec{static_cast<time_t>(nanos / kNanosPerSecond), static_cast<long>(nanos % kNanosPerSecond)};
}

enum class Verdict { kValid, kInvalid, kFailed };  // kFailed: could not tell (an I/O error, no memory)

// Checks the header of the open file `fd` against its name's `hash` and its size.
Verdict CheckHeader(int fd, const Hash& hash, Header* header) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return Verdict::kFailed;
  HeaderBytes bytes;
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) < kSsdHeaderSize) return Verdict::kInvalid;
  if (!ReadAll(fd, bytes.data(), bytes.size(), 0)) return Verdict::kFailed;
  if (!DecodeHeader(bytes, header) || header->hash != hash ||
      static_cast<uint64_t>(st.st_size) != kSsdHeaderSize + header->payload_size) {
    return Verdict::kInvalid;
  }
  return Verdict::kValid;
}

}  // namespace

size_t SsdTier::HashKey::operator()(const Hash& h) const {
  size_t v;
  std::memcpy(&v, h.data(), sizeof(v));  // the hash is a SHA-256 digest: any 8 bytes are uniform
  return v;
}

SsdTier::SsdTier(SsdTierOptions options) : options_(std::move(options)) {}

std::unique_ptr<SsdTier> SsdTier::Open(const SsdTierOptions& options, std::string* error) {
  SsdTierOptions opts = options;
  opts.queue_capacity = std::max<size_t>(opts.queue_capacity, 1);
  std::unique_ptr<SsdTier> tier(new SsdTier(std::move(opts)));
  if (tier->options_.max_bytes == 0) return tier;  // off: no directory, no writer
  if (!tier->Scan(error)) return nullptr;
  tier->writer_ = std::thread([t = tier.get()] { t->WriterLoop(); });
  return tier;
}

bool SsdTier::Scan(std::string* error) {
  const std::string& dir = options_.dir;
  std::error_code ec;
  std::vector<DirEntry> shards;
  if (dir.empty()) {
    *error = "no KV cache directory given";
    return false;
  }
  // create_directories is the only std::filesystem call: it reports through `ec`, never throws here.
  if (!std::filesystem::create_directories(dir, ec) && ec) {
    *error = "cannot create KV cache directory " + dir + ": " + ec.message();
    return false;
  }
  if (!ListDir(dir, &shards)) {
    *error = "cannot list KV cache directory " + dir + ": " + std::strerror(errno);
    return false;
  }
  struct Found {
    int64_t stamp;
    std::string name;
    Hash hash;
    uint64_t size;
  };
  std::vector<Found> found;
  auto remove_bad = [this](const std::string& path, const char* why) {
    if (unlink(path.c_str()) != 0) return;
    ++stats_.corrupt_removed;
    spdlog::warn("kv ssd: removed {} ({})", path, why);
  };
  for (const DirEntry& shard : shards) {
    if (!shard.is_dir || shard.name.size() != kShardLength || !IsLowerHex(shard.name)) continue;
    const std::string shard_path = dir + "/" + shard.name;
    std::vector<DirEntry> files;
    if (!ListDir(shard_path, &files)) {
      spdlog::warn("kv ssd: cannot list {}: {}", shard_path, std::strerror(errno));
      continue;
    }
    for (const DirEntry& file : files) {
      const std::string path = shard_path + "/" + file.name;
      if (HashPrefix(file.name, kTempMarker, /*rest_is_prefix=*/true)) {
        remove_bad(path, "unfinished write");
        continue;
      }
      const std::optional<Hash> hash = HashPrefix(file.name, kSuffix, /*rest_is_prefix=*/false);
      if (!hash) continue;  // not a name of ours: leave it alone
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0) {
        if (errno == ELOOP) remove_bad(path, "a symbolic link");
        continue;
      }
      Header header;
      const Verdict verdict = file.name.compare(0, kShardLength, shard.name) != 0
                                  ? Verdict::kInvalid
                                  : CheckHeader(fd, *hash, &header);
      struct stat st {};
      if (verdict == Verdict::kValid && fstat(fd, &st) == 0) {
        const int64_t stamp = static_cast<int64_t>(st.st_mtim.tv_sec) * kNanosPerSecond + st.st_mtim.tv_nsec;
        found.push_back({stamp, file.name, *hash, static_cast<uint64_t>(st.st_size)});
      } else if (verdict == Verdict::kInvalid) {
        remove_bad(path, "not a valid block file");
      }
      close(fd);
    }
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return std::tie(a.stamp, a.name) < std::tie(b.stamp, b.name); });
  std::lock_guard lock(mu_);
  for (const Found& f : found) {
    InsertLocked(f.hash, f.size);
    last_stamp_ = std::max(last_stamp_, f.stamp);
  }
  while (stats_.bytes > options_.max_bytes && !lru_.empty()) {
    unlink(PathFor(lru_.front()).c_str());
    EraseLocked(lru_.front());
    ++stats_.evictions;
  }
  spdlog::info("kv ssd: {} blocks, {} bytes in {} ({} bad files removed, {} evicted)", index_.size(), stats_.bytes,
               dir, stats_.corrupt_removed, stats_.evictions);
  return true;
}

SsdTier::~SsdTier() {
  if (!writer_.joinable()) return;
  Flush(Clock::now() + kShutdownFlush);
  std::deque<Pending> abandoned;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    for (const Pending& p : queue_) queued_.erase(p.meta.hash);
    stats_.dropped += queue_.size();
    abandoned.swap(queue_);
  }
  work_cv_.notify_all();
  progress_cv_.notify_all();
  writer_.join();
}

bool SsdTier::WritesStoppedLocked() const { return stats_.writes_stopped && Clock::now() < retry_at_; }

bool SsdTier::EnqueueLocked(const BlockMeta& meta, std::shared_ptr<const BlockBuffer> bytes) {
  if (options_.max_bytes == 0 || stop_ || !bytes || bytes->empty()) return false;
  if (index_.count(meta.hash) != 0 || queued_.count(meta.hash) != 0) return false;
  if (queue_.size() >= options_.queue_capacity || WritesStoppedLocked() ||
      kSsdHeaderSize + bytes->size() > options_.max_bytes) {
    ++stats_.dropped;
    return false;
  }
  queued_.insert(meta.hash);
  queue_.push_back({meta, std::move(bytes)});
  work_cv_.notify_one();
  return true;
}

bool SsdTier::Enqueue(const BlockMeta& meta, std::shared_ptr<const BlockBuffer> bytes) {
  std::lock_guard lock(mu_);
  return EnqueueLocked(meta, std::move(bytes));
}

bool SsdTier::EnqueueUntil(const BlockMeta& meta, std::shared_ptr<const BlockBuffer> bytes,
                           Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  progress_cv_.wait_until(lock, deadline, [&] { return stop_ || queue_.size() < options_.queue_capacity; });
  return EnqueueLocked(meta, std::move(bytes));
}

bool SsdTier::Flush(Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return progress_cv_.wait_until(lock, deadline, [&] { return queue_.empty() && !writing_; });
}

void SsdTier::WriterLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || (!queue_.empty() && clearing_ == 0); });
    if (stop_ && queue_.empty()) return;
    Pending block = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    progress_cv_.notify_all();
    lock.unlock();
    WriteBlock(block);
    block.bytes.reset();
    lock.lock();
    writing_ = false;
    queued_.erase(block.meta.hash);
    progress_cv_.notify_all();
  }
}

void SsdTier::WriteBlock(const Pending& block) {
  const BlockBuffer& payload = *block.bytes;
  const uint64_t file_size = kSsdHeaderSize + payload.size();
  std::vector<std::string> victims;
  {
    std::lock_guard lock(mu_);
    if (WritesStoppedLocked()) {
      ++stats_.dropped;
      return;
    }
    while (stats_.bytes + file_size > options_.max_bytes && !lru_.empty()) {
      victims.push_back(PathFor(lru_.front()));
      EraseLocked(lru_.front());
      ++stats_.evictions;
    }
  }
  // Only this thread creates files, so no new file can appear under a victim's name meanwhile.
  for (const std::string& victim : victims) unlink(victim.c_str());

  const HeaderBytes header = EncodeHeader(block.meta, payload);
  const std::string path = PathFor(block.meta.hash);
  const std::string temp = path + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(temp_counter_++);
  int err = 0;
  if (mkdir(path.substr(0, path.rfind('/')).c_str(), kDirMode) != 0 && errno != EEXIST) err = errno;
  const int fd = err != 0 ? -1 : open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kFileMode);
  if (err == 0 && fd < 0) err = errno;
  if (fd >= 0) {
    if (!WriteAll(fd, header.data(), header.size()) || !WriteAll(fd, payload.data(), payload.size())) err = errno;
    if (close(fd) != 0 && err == 0) err = errno;
    if (err == 0 && rename(temp.c_str(), path.c_str()) != 0) err = errno;
    if (err != 0) unlink(temp.c_str());
  }

  std::lock_guard lock(mu_);
  if (err != 0) {
    ++stats_.write_errors;
    if (IsSpaceError(err)) {
      if (!stats_.writes_stopped) spdlog::warn("kv ssd: writes stopped: {}: {}", temp, std::strerror(err));
      stats_.writes_stopped = true;
      retry_at_ = Clock::now() + options_.write_retry_interval;
    } else {
      spdlog::warn("kv ssd: cannot write {}: {}", temp, std::strerror(err));
    }
    return;
  }
  if (stats_.writes_stopped) spdlog::info("kv ssd: writes resumed");
  stats_.writes_stopped = false;
  // The stamp is taken under the lock, like a hit's, so the order on disk is the order in lru_.
  const timespec stamp = ToTimespec(NextStampLocked());
  const timespec times[2] = {stamp, stamp};
  utimensat(AT_FDCWD, path.c_str(), times, 0);
  InsertLocked(block.meta.hash, file_size);
  ++stats_.writes;
}

std::optional<BlockBuffer> SsdTier::Read(const Hash& hash, const Hash& model) {
  {
    std::lock_guard lock(mu_);
    if (index_.count(hash) == 0) {
      ++stats_.misses;
      return std::nullopt;
    }
  }
  const std::string path = PathFor(hash);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    std::lock_guard lock(mu_);
    ++stats_.misses;
    // Evicted meanwhile (its entry is gone already), or deleted behind our back.
    if (access(path.c_str(), F_OK) != 0 && errno == ENOENT && index_.count(hash) != 0) EraseLocked(hash);
    return std::nullopt;
  }
  Header header;
  BlockBuffer buffer;
  Verdict verdict = CheckHeader(fd, hash, &header);
  if (verdict == Verdict::kValid && header.model != model) verdict = Verdict::kInvalid;
  if (verdict == Verdict::kValid) {
    buffer = BlockBuffer::Allocate(header.payload_size);
    if (buffer.size() != header.payload_size || !ReadAll(fd, buffer.data(), buffer.size(), kSsdHeaderSize)) {
      verdict = Verdict::kFailed;
    } else if (XXH3_64bits(buffer.data(), buffer.size()) != header.payload_xxh) {
      verdict = Verdict::kInvalid;
    }
  }
  {
    std::lock_guard lock(mu_);
    if (verdict == Verdict::kValid) {
      ++stats_.hits;
      if (auto it = index_.find(hash); it != index_.end()) {
        const timespec stamp = ToTimespec(NextStampLocked());
        const timespec times[2] = {stamp, stamp};
        futimens(fd, times);
        lru_.splice(lru_.end(), lru_, it->second.lru);
      }
    } else {
      ++stats_.misses;
      if (verdict == Verdict::kInvalid) RemoveCorruptLocked(fd, path, hash);
    }
  }
  close(fd);
  if (verdict != Verdict::kValid) return std::nullopt;
  return buffer;
}

void SsdTier::RemoveCorruptLocked(int fd, const std::string& path, const Hash& hash) {
  struct stat opened {}, named {};
  if (fstat(fd, &opened) != 0 || stat(path.c_str(), &named) != 0) return;
  if (opened.st_dev != named.st_dev || opened.st_ino != named.st_ino) return;  // replaced meanwhile
  if (unlink(path.c_str()) != 0) return;
  if (index_.count(hash) != 0) EraseLocked(hash);
  ++stats_.corrupt_removed;
  spdlog::warn("kv ssd: removed {} (failed validation on read)", path);
}

bool SsdTier::Contains(const Hash& hash) const {
  std::lock_guard lock(mu_);
  return index_.count(hash) != 0 || queued_.count(hash) != 0;
}

SsdClearResult SsdTier::Clear() {
  SsdClearResult result;
  std::deque<Pending> cancelled;  // destroyed after the lock is released
  std::unique_lock lock(mu_);
  ++clearing_;
  for (const Pending& p : queue_) queued_.erase(p.meta.hash);
  cancelled.swap(queue_);
  progress_cv_.notify_all();
  progress_cv_.wait(lock, [&] { return !writing_; });
  for (const Hash& hash : lru_) {
    if (unlink(PathFor(hash).c_str()) != 0 && errno != ENOENT) continue;
    ++result.files_deleted;
    result.bytes_deleted += index_.at(hash).size;
  }
  index_.clear();
  lru_.clear();
  stats_.bytes = 0;
  --clearing_;
  work_cv_.notify_all();
  return result;
}

SsdTierStats SsdTier::stats() const {
  std::lock_guard lock(mu_);
  SsdTierStats s = stats_;
  s.entries = index_.size();
  s.queue_depth = queue_.size() + (writing_ ? 1 : 0);
  return s;
}

int64_t SsdTier::NextStampLocked() {
  last_stamp_ = std::max(RealtimeNanos(), last_stamp_ + 1);
  return last_stamp_;
}

void SsdTier::InsertLocked(const Hash& hash, uint64_t size) {
  if (index_.count(hash) != 0) EraseLocked(hash);
  index_[hash] = Entry{size, lru_.insert(lru_.end(), hash)};
  stats_.bytes += size;
}

void SsdTier::EraseLocked(const Hash& hash) {
  const auto it = index_.find(hash);
  stats_.bytes -= it->second.size;
  lru_.erase(it->second.lru);
  index_.erase(it);
}

std::string SsdTier::PathFor(const Hash& hash) const {
  const std::string hex = ToHex(hash);
  return options_.dir + "/" + hex.substr(0, kShardLength) + "/" + hex + kSuffix;
}

}  // namespace llmux::kv
