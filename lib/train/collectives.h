// What the training loop needs from the other processes of a data-parallel run, as an interface:
// the loop stays free of c10d (lib/dist implements it on a process group), and a single process
// runs without one. Every call is a collective: all ranks make it, in the same order.
#pragma once

#include <ATen/Tensor.h>

#include <exception>
#include <string>

namespace libreyolo::train {

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int local_rank() const = 0;  // on this machine: the GPU it uses
  // In place, over every rank.
  virtual void sum(at::Tensor& tensor) = 0;
  virtual void max(at::Tensor& tensor) = 0;
  // Every rank's rows ([n_r, ...], n_r may differ) concatenated in rank order, on every rank.
  virtual at::Tensor gather_rows(const at::Tensor& rows) = 0;
  // A failure as status.json and the user read it: a collective's transport error (a peer that
  // went away) in words, anything else as it is.
  virtual std::string describe_failure(const std::exception& error) const { return error.what(); }
};

}  // namespace libreyolo::train
