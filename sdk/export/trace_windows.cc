// Trace windows. See trace_windows.h.
#include "sdk/export/trace_windows.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace trainscope::exporter {
namespace {

constexpr size_t kMaxOpen = 16;          // steps with events but no step event yet
constexpr size_t kRememberDone = 256;    // step indices decided away, for stragglers
constexpr size_t kSpareChunks = 8;       // dropped chunks kept for new ones,
constexpr size_t kSpareText = 64 << 10;  // ... with their text's room up to this

}  // namespace

TraceWindows::TraceWindows(TraceWriter* writer, TraceWindowOptions options)
    : writer_(writer), options_(options), warmup_(options.warmup_steps) {}

TraceWindows::~TraceWindows() = default;

uint64_t TraceWindows::Room() const {
  const uint64_t used =
      writer_->frame_bytes() + writer_->metadata_bytes() + writer_->body_bytes() + held_bytes_;
  return used < options_.budget_bytes ? options_.budget_bytes - used : 0;
}

bool TraceWindows::Fits(uint64_t more) const { return more <= Room(); }

TraceWindows::Chunk* TraceWindows::Find(int64_t step) {
  auto it = chunks_.find(step);
  return it != chunks_.end() ? it->second.get() : nullptr;
}

TraceWindows::Chunk& TraceWindows::At(int64_t step) {
  if (Chunk* held = Find(step)) return *held;
  return Add(step);
}

TraceWindows::Chunk& TraceWindows::Add(int64_t step) {
  Chunk* chunk;
  if (spare_chunks_.empty()) {
    chunk = (chunks_[step] = std::make_unique<Chunk>()).get();
  } else {  // a dropped step's node and chunk, reset by Drop
    auto node = std::move(spare_chunks_.back());
    spare_chunks_.pop_back();
    node.key() = step;
    chunk = chunks_.insert(std::move(node)).position->second.get();
  }
  chunk->index = step;
  chunk->opened = ++opened_;
  ++open_;  // a new chunk is kOpen
  return *chunk;
}

void TraceWindows::SetFate(Chunk* chunk, Fate fate) {
  open_ -= chunk->fate == Fate::kOpen;
  open_ += fate == Fate::kOpen;
  chunk->fate = fate;
}

bool TraceWindows::WasDropped(int64_t step) const {
  return step <= dropped_max_ &&
         std::find(dropped_.begin(), dropped_.end(), step) != dropped_.end();
}

TraceWindows::Chunk* TraceWindows::ChunkFor(int64_t step) {
  if (Chunk* held = Find(step)) return held;
  if (WasDropped(step)) return nullptr;
  // Steps that never end (an index no StepScope ended) must not keep the
  // ones that do out: past kMaxOpen open steps, the one opened longest ago
  // goes, whatever its index, and the new one is taken. The open ones are
  // counted, not looked for: with every step traced thousands are held.
  if (open_ >= kMaxOpen) {
    const Chunk* oldest = nullptr;
    for (const auto& [index, chunk] : chunks_) {
      if (chunk->fate == Fate::kOpen && (oldest == nullptr || chunk->opened < oldest->opened)) {
        oldest = chunk.get();
      }
    }
    if (oldest != nullptr) Drop(oldest->index);
  }
  Chunk& chunk = Add(step);
  if (!spare_raw_.empty()) {  // the room of a chunk dropped or formatted before
    chunk.raw = std::move(spare_raw_.back());
    spare_raw_.pop_back();
  }
  return &chunk;
}

TraceWindows::Chunk* TraceWindows::ChunkAt(TimestampNs t) {
  for (auto& [index, chunk] : chunks_) {
    if (chunk->position >= 0 && chunk->start_ns <= t && t < chunk->end_ns) return chunk.get();
  }
  return nullptr;
}

// A chunk the budget cannot take more of: it and its window are left out.
void TraceWindows::Overflow(Chunk* chunk) {
  chunk->overflow = true;
  if (chunk->fate == Fate::kWindow) {
    DropWindow(chunk->window);
  } else if (chunk->fate == Fate::kSlow) {
    slow_.erase(std::find(slow_.begin(), slow_.end(), chunk->index));
    slow_floor_known_ = false;
    ++stats_.windows_dropped;
    dirty_ = true;
    Drop(chunk->index);
  } else {
    held_bytes_ -= chunk->bytes();
    Recycle(&chunk->raw);
    chunk->text.clear();
    chunk->text.shrink_to_fit();
  }
}

void TraceWindows::AppendText(Chunk* chunk, const std::string& text) {
  if (chunk->overflow) return;
  if (!Fits(text.size())) return Overflow(chunk);
  chunk->text += text;
  held_bytes_ += text.size();
  if (chunk->fate == Fate::kSlow) dirty_ = true;
}

// Keeps the room of a few raw vectors for the next steps (a step's events
// would otherwise grow a new one, allocation by allocation); gives the rest
// back. Spare room: kSpareRaw vectors of the largest steps' events.
void TraceWindows::Recycle(std::vector<std::pair<uint32_t, Event>>* raw) {
  constexpr size_t kSpareRaw = 8;
  raw->clear();
  if (raw->capacity() > 0 && raw->capacity() <= 4096 && spare_raw_.size() < kSpareRaw) {
    spare_raw_.push_back(std::move(*raw));
  }
  std::vector<std::pair<uint32_t, Event>>().swap(*raw);
}

// Formats a kept chunk's raw events.
void TraceWindows::Materialize(Chunk* chunk) {
  if (chunk->raw.empty()) return;
  scratch_.clear();
  for (const auto& [tid, event] : chunk->raw) {
    writer_->FormatEvent(&scratch_, tid, event, thread_id_of_);
    tids_.insert(tid);
  }
  held_bytes_ -= chunk->raw.size() * sizeof(chunk->raw[0]);
  Recycle(&chunk->raw);
  AppendText(chunk, scratch_);
}

void TraceWindows::AddEvents(uint32_t os_tid, const Event* events, size_t count,
                             const TraceWriter::ThreadIdOf& thread_id_of) {
  if (!thread_id_of_) thread_id_of_ = thread_id_of;
  // The chunk of the last event's step: consecutive events mostly share one.
  // Forgotten after anything that may drop a chunk.
  int64_t cached_step = std::numeric_limits<int64_t>::min();
  Chunk* cached = nullptr;
  // Raw events' bytes that fit without another look at the budget: only
  // the raw events added since the look grew what it counts. 0 after
  // anything else that may have grown it (text, the writer's metadata).
  uint64_t room = 0;
  for (size_t k = 0; k < count; ++k) {
    const Event& e = events[k];
    if (e.step < 0 && e.kind != EventKind::kStep) {
      room = 0;
      if (!startup_open_ || startup_cut_) continue;
      scratch_.clear();
      writer_->FormatEvent(&scratch_, os_tid, e, thread_id_of_);
      if (!Fits(scratch_.size())) {
        startup_cut_ = true;
        ++stats_.windows_dropped;
        continue;
      }
      startup_ += scratch_;
      held_bytes_ += scratch_.size();
      tids_.insert(os_tid);
      continue;
    }
    Chunk* chunk;
    if (e.step == cached_step) {
      chunk = cached;
    } else {
      chunk = ChunkFor(e.step);
      cached_step = e.step;
      cached = chunk;
    }
    if (chunk != nullptr && !chunk->overflow) {
      if (chunk->fate == Fate::kOpen || chunk->fate == Fate::kLookahead) {
        constexpr uint64_t kRaw = sizeof(chunk->raw[0]);
        if (room < kRaw) room = Room();
        if (room < kRaw) {
          Overflow(chunk);
          cached_step = std::numeric_limits<int64_t>::min();
        } else {
          chunk->raw.emplace_back(os_tid, e);
          held_bytes_ += kRaw;
          room -= kRaw;
        }
      } else {  // kept: a straggler from another thread
        scratch_.clear();
        writer_->FormatEvent(&scratch_, os_tid, e, thread_id_of_);
        AppendText(chunk, scratch_);
        tids_.insert(os_tid);
        cached_step = std::numeric_limits<int64_t>::min();
        room = 0;
      }
    }
    if (e.kind == EventKind::kStep) {
      Close(e);
      cached_step = std::numeric_limits<int64_t>::min();
      room = 0;
    }
  }
}

void TraceWindows::Assign(Chunk* chunk, int64_t id, int64_t begin, int64_t end) {
  auto [it, added] = windows_.try_emplace(id);
  Window& window = it->second;
  if (added) {
    window.begin = begin;
    window.end = end;
  }
  if (window.dropped || chunk->overflow) {
    if (!window.dropped) DropWindow(id);
    Drop(chunk->index);
    return;
  }
  SetFate(chunk, Fate::kWindow);
  chunk->window = id;
  window.steps.push_back(chunk->index);
  Materialize(chunk);
}

void TraceWindows::Close(const Event& step) {
  const int64_t position = closed_++;
  if (startup_open_) startup_open_ = false;
  Chunk* chunk = Find(step.step);
  if (!first_started_) warmup_.Add(step.end_ns - step.start_ns);
  if (chunk == nullptr || chunk->position >= 0) {  // dropped, or an index reused
    if (!first_started_) TakeWarmup();
    return;
  }
  chunk->position = position;
  chunk->start_ns = step.start_ns;
  chunk->end_ns = step.end_ns;
  chunk->duration_ms = static_cast<double>(step.end_ns - step.start_ns) / 1e6;
  if (!first_started_) {
    SetFate(chunk, Fate::kLookahead);
    lookahead_.push_back(chunk->index);
    TakeWarmup();
    return;
  }
  Decide(chunk);
}

// Drops the lookahead's steps the warm-up rule has placed in the warm-up;
// once it has decided, starts the first steady window there and decides
// the rest of the lookahead as any other step.
void TraceWindows::TakeWarmup() {
  const int64_t warm_before = warmup_.settled_before();
  while (!lookahead_.empty()) {
    const Chunk* front = Find(lookahead_.front());
    if (front != nullptr && front->position >= warm_before) break;
    Drop(lookahead_.front());
    lookahead_.pop_front();
  }
  if (!warmup_.decided()) return;
  first_started_ = true;
  first_begin_ = warmup_.warmup();
  std::deque<int64_t> rest;
  rest.swap(lookahead_);
  for (int64_t index : rest) {
    Chunk* found = Find(index);
    if (found == nullptr) continue;
    SetFate(found, Fate::kOpen);
    Decide(found);
  }
}

// A closed step after the warm-up: the first steady window, a repeating
// window, one of the slowest steps, or dropped.
void TraceWindows::Decide(Chunk* chunk) {
  const int64_t position = chunk->position;
  const int64_t n = options_.first_steps;
  if (position == first_begin_) stats_.first_window_step = chunk->index;
  if (n > 0 && position >= first_begin_ && position < first_begin_ + n) {
    Assign(chunk, 0, first_begin_, first_begin_ + n);
  }
  chunk = Find(chunk->index);
  if (chunk == nullptr || chunk->fate != Fate::kOpen) return;

  // The repeating windows.
  if (options_.active > 0 && position >= options_.skip_first) {
    const int64_t q = position - options_.skip_first;
    const int64_t cycle = options_.wait + options_.warmup + options_.active;
    const int64_t k = q / cycle;
    const int64_t r = q % cycle;
    const int64_t skipped = options_.wait + options_.warmup;
    if ((options_.repeat == 0 || k < options_.repeat) && r >= skipped) {
      const int64_t begin = position - (r - skipped);
      Assign(chunk, 1 + k, begin, begin + options_.active);
      return;
    }
  }
  DecideSlowest(chunk);
}

// The slowest steady steps.
void TraceWindows::DecideSlowest(Chunk* chunk) {
  const double ms = chunk->duration_ms;
  if (options_.slowest_steps > 0 && !chunk->overflow) {
    if (slow_.size() >= static_cast<size_t>(options_.slowest_steps)) {
      auto fastest = [&] {
        return std::min_element(slow_.begin(), slow_.end(), [&](int64_t a, int64_t b) {
          return At(a).duration_ms < At(b).duration_ms;
        });
      };
      // The fastest kept one's time, known until the kept ones change: most
      // steps are not slower, and are dropped without looking them up.
      if (!slow_floor_known_) {
        slow_floor_ = At(*fastest()).duration_ms;
        slow_floor_known_ = true;
      }
      if (slow_floor_ >= ms) return Drop(chunk->index);
      const auto evict = fastest();
      const int64_t evicted = *evict;
      slow_.erase(evict);
      Drop(evicted);
    }
    SetFate(chunk, Fate::kSlow);
    slow_.push_back(chunk->index);
    slow_floor_known_ = false;
    dirty_ = true;
    Materialize(chunk);
    return;
  }
  Drop(chunk->index);
}

void TraceWindows::Drop(int64_t index) {
  auto it = chunks_.find(index);
  if (it == chunks_.end()) return;
  Chunk& chunk = *it->second;
  open_ -= chunk.fate == Fate::kOpen;
  held_bytes_ -= chunk.bytes();
  Recycle(&chunk.raw);
  if (spare_chunks_.size() < kSpareChunks) {
    std::string text = std::move(chunk.text);
    text.clear();
    if (text.capacity() > kSpareText) std::string().swap(text);
    chunk = Chunk();
    chunk.text = std::move(text);
    spare_chunks_.push_back(chunks_.extract(it));
  } else {
    chunks_.erase(it);
  }
  dropped_max_ = std::max(dropped_max_, index);
  if (dropped_.size() < kRememberDone) {
    dropped_.push_back(index);
  } else {  // full: the oldest is forgotten
    dropped_[dropped_head_] = index;
    dropped_head_ = (dropped_head_ + 1) % kRememberDone;
  }
}

void TraceWindows::DropWindow(int64_t id) {
  Window& window = windows_[id];
  if (window.dropped) return;
  window.dropped = true;
  ++stats_.windows_dropped;
  for (int64_t index : window.steps) Drop(index);
  window.steps.clear();
}

void TraceWindows::AddDevice(const ground::Timeline& timeline) {
  for (const ground::Interval& i : timeline.intervals()) {
    if (!ground::IsDeviceSide(i.kind)) continue;
    Chunk* chunk = nullptr;
    if (i.step >= 0) {
      chunk = Find(i.step);
    } else {
      chunk = ChunkAt(i.start_ns);
    }
    if (chunk == nullptr && closed_ == 0 && !startup_cut_) {
      scratch_.clear();
      writer_->FormatDeviceInterval(&scratch_, timeline, i);
      if (Fits(scratch_.size())) {
        startup_ += scratch_;
        held_bytes_ += scratch_.size();
      } else {
        startup_cut_ = true;
        ++stats_.windows_dropped;
      }
      continue;
    }
    if (chunk == nullptr || chunk->overflow) continue;
    scratch_.clear();
    writer_->FormatDeviceInterval(&scratch_, timeline, i);
    AppendText(chunk, scratch_);
  }
}

void TraceWindows::ForgetThread(uint32_t os_tid) {
  if (tids_.count(os_tid) != 0) return;  // its events are kept: so is its name
  // Its last events may still be undecided in a chunk: the name waits.
  if (UndecidedSince(opened_)) {
    retiring_.push_back({os_tid, opened_});
    return;
  }
  writer_->ForgetThread(os_tid);
}

bool TraceWindows::UndecidedSince(uint64_t mark) const {
  for (const auto& [index, chunk] : chunks_) {
    if (chunk->opened <= mark && !chunk->raw.empty()) return true;
  }
  return false;
}

// The retired threads whose chunks are all decided (or every one, at the
// end): named when some of their events were kept, forgotten otherwise.
void TraceWindows::ForgetRetired(bool final) {
  size_t kept = 0;
  for (const Retiring& r : retiring_) {
    if (tids_.count(r.os_tid) != 0) continue;
    if (!final && UndecidedSince(r.mark)) {
      retiring_[kept++] = r;
      continue;
    }
    writer_->ForgetThread(r.os_tid);
  }
  retiring_.resize(kept);
}

void TraceWindows::StepFolded(int64_t /*index*/) { ++folded_; }

absl::Status TraceWindows::WriteWindow(Window& window) {
  std::string text;
  for (int64_t index : window.steps) {
    const Chunk* chunk = Find(index);
    if (chunk == nullptr) continue;
    text += chunk->text;
  }
  for (int64_t index : window.steps) Drop(index);
  window.steps.clear();
  absl::Status status = writer_->AppendToBody(text);
  if (status.ok()) {
    ++stats_.windows_written;
    dirty_ = true;
  }
  return status;
}

absl::Status TraceWindows::Flush(bool publish, bool final) {
  absl::Status status;
  if (!startup_.empty()) {
    held_bytes_ -= startup_.size();
    status.Update(writer_->AppendToBody(startup_));
    startup_.clear();
    startup_written_ = true;
    dirty_ = true;
  }
  if ((final || !startup_open_) && startup_written_) {
    ++stats_.windows_written;  // counted once, when it ends
    startup_written_ = false;
  }
  if (final && !first_started_) {
    // The run ended before the warm-up rule decided: it decides with the
    // steps there are.
    warmup_.Finish();
    TakeWarmup();
  }
  for (auto it = windows_.begin(); it != windows_.end();) {
    Window& window = it->second;
    const bool closed = closed_ >= window.end;
    const bool complete = final || (closed && folded_ >= window.end + 2);
    if (window.dropped && (closed || final)) {
      it = windows_.erase(it);
      continue;
    }
    if (!complete || window.dropped) {
      ++it;
      continue;
    }
    if (it->first == 0) stats_.first_window_steps = static_cast<int64_t>(window.steps.size());
    status.Update(WriteWindow(window));
    it = windows_.erase(it);
  }
  if (!retiring_.empty()) ForgetRetired(final);
  if ((dirty_ && publish) || final) {
    std::vector<int64_t> order = slow_;
    std::sort(order.begin(), order.end());
    std::vector<std::string_view> held;
    for (int64_t index : order) held.emplace_back(At(index).text);
    // While running, on the writer's thread: the copy of a body of up to
    // budget_bytes would keep the drain from the rings.
    status.Update(final ? writer_->Publish(true, held) : writer_->PublishSoon(held));
    stats_.bytes = writer_->published_bytes();
    dirty_ = false;
  }
  stats_.slowest.clear();
  for (int64_t index : slow_) stats_.slowest.push_back({index, At(index).duration_ms});
  std::sort(stats_.slowest.begin(), stats_.slowest.end(),
            [](const SlowStep& a, const SlowStep& b) { return a.duration_ms > b.duration_ms; });
  return status;
}

}  // namespace trainscope::exporter
