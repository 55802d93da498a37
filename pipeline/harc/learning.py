"""Learning over task position: does the chance of solving a task change with its position in the
participant's sequence?

Model: per split, a logistic GEE (generalised estimating equations; statsmodels `GEE` with a Binomial family
and logit link) of is_solved (within 3 attempts) on task_number, one cluster per participant, exchangeable
working correlation, robust (sandwich) standard errors; coefficients on the log-odds scale, odds ratio per
position, Wald z tests and confidence intervals.

Why GEE and not a mixed-effects logistic model:
- The question is population-averaged: how much does accuracy change, on average, from one position to the
  next? That is what a marginal (GEE) model estimates. A random-intercept model answers a subject-specific
  question (the change for a given participant), whose odds ratio is larger in magnitude and harder to
  compare with the paper's descriptive accuracy-by-position curve.
- statsmodels has no maximum-likelihood mixed logistic model: `BinomialBayesMixedGLM` fits a variational
  Bayes (or Laplace) approximation with priors on the variance components and reports posterior summaries,
  not the frequentist tests the rest of the analyses use.
- The robust standard errors stay valid when the exchangeable working correlation is wrong; the only
  assumption is that participants are independent, which they are (separate people, no shared tasks order).
- Tasks were assigned to positions at random, so task difficulty is not a confounder of position; it only adds
  noise, which the robust errors absorb. Task fixed effects (400 per split) would make the model unstable on
  participant-sized clusters of 5.

When a split cannot be fitted (fewer than 2 participants, no variation in the outcome or in task_number, or the
fit fails) its rows carry the counts with null estimates; nothing is dropped silently.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import polars as pl

from pipeline.harc.accuracy import release_frame
from pipeline.harc.stats import CONFIDENCE

MODEL_KIND = "gee_logit_exchangeable_participant_clusters"
TERMS = ("Intercept", "task_number")


def position_accuracy(outcomes: pl.DataFrame) -> pl.DataFrame:
    """Per split and task_number: participants with a finished task there, solvers (3 attempts), solve rate."""
    return (outcomes.group_by("task_split", "task_number")
            .agg(pl.len().cast(pl.Int64).alias("n_participants"),
                 pl.col("is_solved").sum().cast(pl.Int64).alias("n_solvers"))
            .with_columns((pl.col("n_solvers") / pl.col("n_participants")).alias("solve_rate"))
            .sort("task_split", "task_number"))


def fit_gee(solved: np.ndarray, position: np.ndarray, groups: np.ndarray,
            confidence: float = CONFIDENCE) -> dict[str, dict[str, float]] | None:
    """Coefficients, robust SEs, z, p and intervals per term; None when the model cannot be fitted."""
    # The GEE modules only: statsmodels.api would import every model family (a second of start-up).
    from statsmodels.genmod.cov_struct import Exchangeable
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_estimating_equations import GEE

    solved, position = np.asarray(solved, dtype=float), np.asarray(position, dtype=float)
    if len(np.unique(groups)) < 2 or np.ptp(solved) == 0 or np.ptp(position) == 0:
        return None
    exog = np.column_stack([np.ones(len(position)), position.astype(float)])
    model = GEE(solved.astype(float), exog, groups=groups, family=Binomial(), cov_struct=Exchangeable())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = model.fit()
    except (ValueError, np.linalg.LinAlgError, ZeroDivisionError):
        return None
    params, bse = np.asarray(result.params), np.asarray(result.bse)
    if not (np.all(np.isfinite(params)) and np.all(np.isfinite(bse))):
        return None
    ci = np.asarray(result.conf_int(alpha=1 - confidence))
    z, p = np.asarray(result.tvalues), np.asarray(result.pvalues)
    return {term: {"coefficient": float(params[i]), "std_error": float(bse[i]), "z_value": float(z[i]),
                   "p_value": float(p[i]), "ci_low": float(ci[i, 0]), "ci_high": float(ci[i, 1])}
            for i, term in enumerate(TERMS)}


def learning_model(outcomes: pl.DataFrame, confidence: float = CONFIDENCE) -> pl.DataFrame:
    """out_harc__learning_model rows (without release_generation), two terms per split."""
    rows: list[dict[str, Any]] = []
    for split in sorted(outcomes["task_split"].unique().to_list()):
        sub = outcomes.filter(pl.col("task_split") == split).sort("participant_id", "task_number")
        fit = fit_gee(sub["is_solved"].to_numpy(), sub["task_number"].to_numpy(),
                      sub["participant_id"].to_numpy(), confidence)
        for term in TERMS:
            est = (fit or {}).get(term, {})
            coefficient = est.get("coefficient")
            rows.append({
                "task_split": split, "model_term": term, "model_kind": MODEL_KIND, "coefficient": coefficient,
                "std_error": est.get("std_error"), "z_value": est.get("z_value"), "p_value": est.get("p_value"),
                "ci_low": est.get("ci_low"), "ci_high": est.get("ci_high"), "confidence_level": confidence,
                "odds_ratio": None if coefficient is None else math.exp(coefficient),
                "n_observations": sub.height, "n_groups": sub["participant_id"].n_unique(),
            })
    return release_frame("out_harc__learning_model", rows)
