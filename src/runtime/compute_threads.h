// The compute threads llama.cpp runs a decode step on.
#pragma once

namespace llmux::runtime {

// Ends the calling thread's pool of compute threads (OpenMP builds); the next
// decode on this thread starts a new one. Call it on an engine thread that
// goes idle, or that hands the CPU to another engine: libgomp counts every
// pool's threads, and once they outnumber the cores it makes *all* barriers
// sleep instead of spin, which slows the engine that is working by a quarter.
// A no-op without OpenMP.
void ReleaseComputeThreads();

}  // namespace llmux::runtime
