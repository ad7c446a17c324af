"""Shapley-PRM credit assignment, as pure functions: no env, no model.

Paper: Yang et al., "Who Gets the Reward & Who Gets the Blame? Evaluation-Aligned Training Signals
for Multi-LLM Agents" (Shapley-PRM), Sec. 4 and App. A.3.

| module     | paper                     | job                                                             |
|------------|---------------------------|-----------------------------------------------------------------|
| `shapley`  | Sec. 4.1.1, Eq. 3-5; A.3  | system -> agent: exact and Monte Carlo Shapley values φ_i, α_i |
| `message`  | Sec. 4.1.2, Eq. 6-10      | agent -> message: judge labels s_{i,t}, rewards r_{i,t}         |
| `localize` | Sec. 4.2                  | failure route: first-error binary search, preference pairs      |
| `dpo`      | Sec. 4.2, 5 (DPO)         | the preference loss for those pairs                             |
| `llm_judge`| Sec. 4.1.2 (LLM-as-judge) | message labels from an OpenAI-compatible endpoint               |
| `team`     | all of the above          | `--credit shapley` in the trainer: coalition replays -> credits |

Success episodes give dense per-message rewards (shapley -> message); failed ones give
(H_{t*-1}, y+, y-) pairs (localize -> dpo). All but `team` and `llm_judge` are pure functions (no
env, no model); `team` runs the coalition replays through `llm_marl.rollout.replay`.
"""

from llm_marl.credit.dpo import dpo_loss
from llm_marl.credit.localize import Localization, PreferencePair, PrefixJudge, first_error
from llm_marl.credit.message import (CallableJudge, ConstantJudge, InfoJudge, Judge, Message, MessageCredit,
                                     allocate, allocation_weights, conservation_gap, message_rewards)
from llm_marl.credit.shapley import (all_coalitions, credit_ratio, efficiency_gap, exact_shapley, monte_carlo_shapley,
                                     permutation_coalitions, sample_permutations)

__all__ = [
    "CallableJudge", "ConstantJudge", "InfoJudge", "Judge", "Localization", "Message", "MessageCredit",
    "PreferencePair", "PrefixJudge", "all_coalitions", "allocate", "allocation_weights", "conservation_gap",
    "credit_ratio", "dpo_loss", "efficiency_gap", "exact_shapley", "first_error", "message_rewards",
    "monte_carlo_shapley", "permutation_coalitions", "sample_permutations",
]
