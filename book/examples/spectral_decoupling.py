"""Spectral decoupling as an OOD objective for Table 2's ColoredMNIST protocol.

Spectral decoupling (Pezeshki et al., 2021, "Gradient Starvation: A Learning Proclivity in Neural
Networks", NeurIPS) penalises the squared logits, ``(lambda / 2) ||y_hat||^2``, so that the
features learned first (here, colour) cannot drive the logits up alone. Written as featlib's
objectives are, per training environment e with logits z_e:

    loss = sum_e R_e + lambda * mean_e mean_i z_{e,i}^2

(the paper's factor 1/2 is folded into lambda; the mean over examples keeps the penalty's size
independent of the number of images). Pezeshki et al. put it in place of weight decay; here the
protocol's own L2 term stays, as for every other objective of Table 2.

Load it with ``--objective-file book/examples/spectral_decoupling.py`` (python -m
featlib.cli.run_cmnist) or ``featlib.experiments.objective_files.load_objective_file(path)``.
"""
import torch

from featlib.objectives import OBJECTIVES, Objective


@OBJECTIVES.register("spectral_decoupling")
class SpectralDecoupling(Objective):
    """sum_e R_e + lambda * mean_e mean_i z_{e,i}^2 (Pezeshki et al., 2021)."""

    name = "spectral_decoupling"
    label = "SD"  # the row's name in Table 2 (without it: the registered name)

    def penalty(self, inputs):
        # inputs.logits: one tensor per environment, shape (*B, n_e): B are the run dimensions.
        # Reduce over the examples (the last dimension), never over the runs.
        per_env = torch.stack([z.pow(2).mean(-1) for z in inputs.logits])  # (E, *B)
        return self.reduce_envs(per_env)  # (*B,): the protocol averages over environments
