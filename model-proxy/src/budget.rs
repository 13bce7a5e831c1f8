//! Budgets and usage: per-trial limits, the run-wide ledger (totals over every trial ever
//! registered, and an optional run budget), and the price table.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use crate::config::{Price, price_of};
use crate::wire::TokenCounts;

/// Per-trial limits; `None` means unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Total tokens (input + output + cache) across all calls.
    pub max_tokens: Option<u64>,
    /// Total cost in USD (from the price table).
    pub max_cost_usd: Option<f64>,
    /// Number of model requests.
    pub max_requests: Option<u64>,
}

/// Limits over the whole run (every trial ever registered with this proxy); `None` means
/// unlimited. Once spent, every trial's next model call is refused with the quota error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RunBudget {
    /// Total cost in USD.
    pub max_cost_usd: Option<f64>,
    /// Total tokens.
    pub max_tokens: Option<u64>,
}

/// Which budget stopped a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetScope {
    /// The trial's own [`Budget`].
    Trial,
    /// The run's [`RunBudget`].
    Run,
}

/// Usage of one model within a trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelUsage {
    /// Requests that reached a provider.
    pub requests: u64,
    /// Tokens reported by the provider.
    pub tokens: TokenCounts,
    /// Cost in USD.
    pub cost_usd: f64,
}

/// A trial's usage so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialUsage {
    /// The trial.
    pub trial_id: String,
    /// Model requests accepted (sent to a provider, the script or the replay log).
    pub requests: u64,
    /// Requests refused or failed (auth passed; bad request, unknown model, budget, upstream error).
    pub errors: u64,
    /// Token totals.
    pub tokens: TokenCounts,
    /// Cost in USD.
    pub cost_usd: f64,
    /// Calls whose model has no price in the table (their cost counts as 0).
    pub unpriced_calls: u64,
    /// Per model.
    pub per_model: BTreeMap<String, ModelUsage>,
    /// A budget (the trial's or the run's) was hit: the trial was stopped by a budget.
    pub budget_exhausted: bool,
    /// Which budget, in words.
    pub exhausted_reason: Option<String>,
    /// Which budget: the trial's own or the run's.
    #[serde(default)]
    pub exhausted_by: Option<BudgetScope>,
}

/// The run's usage so far: every call of every trial, registered now or before.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunUsage {
    /// Registrations so far (a retried trial counts once per registration).
    pub trials: u64,
    /// Model requests accepted.
    pub requests: u64,
    /// Token totals.
    pub tokens: TokenCounts,
    /// Cost in USD.
    pub cost_usd: f64,
    /// The [`RunBudget`] is spent: every further call is refused.
    pub budget_exhausted: bool,
    /// Which limit, in words.
    pub exhausted_reason: Option<String>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one admitted call may cost at most: held against the trial's and the run's budgets
/// from admission until the call settles with its real usage (or is released unsent).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Reservation {
    /// Worst-case tokens (input bound + output cap).
    pub(crate) tokens: u64,
    /// Worst-case cost in USD (0 for an unpriced model).
    pub(crate) cost_usd: f64,
}

impl Reservation {
    fn add(&mut self, o: &Reservation) {
        self.tokens += o.tokens;
        self.cost_usd += o.cost_usd;
    }

    fn sub(&mut self, o: &Reservation) {
        self.tokens = self.tokens.saturating_sub(o.tokens);
        self.cost_usd = (self.cost_usd - o.cost_usd).max(0.0);
    }
}

/// Why a call was not admitted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refused {
    /// A budget is spent, or what is left cannot pay for this call's worst case even alone:
    /// the trial is marked exhausted.
    Exhausted(String),
    /// The worst case fits what is left, but not beside the calls still running; a later retry
    /// may be admitted.
    Busy(String),
}

/// Rounding slack for cost comparisons.
const EPSILON_USD: f64 = 1e-9;

/// Whether `worst` fits under `max` given what is `spent` and `held` by running calls.
enum Fit {
    Yes,
    Busy,
    Never,
}

/// The refusal a fit calls for: none, never (the call can never fit), or busy (it would fit
/// once the calls still running, which hold `held`, have ended).
fn refusal(fit: Fit, what: &str, held: &str) -> Result<(), Refused> {
    match fit {
        Fit::Yes => Ok(()),
        Fit::Never => Err(Refused::Exhausted(format!(
            "{what}); lower the request's output cap (max_tokens) or raise the budget"
        ))),
        Fit::Busy => Err(Refused::Busy(format!(
            "{what} beside the calls still running, which hold {held}); retry when they end"
        ))),
    }
}

fn fit_cost(spent: f64, held: f64, worst: f64, max: f64) -> Fit {
    if spent + worst > max + EPSILON_USD {
        Fit::Never
    } else if spent + held + worst > max + EPSILON_USD {
        Fit::Busy
    } else {
        Fit::Yes
    }
}

fn fit_tokens(spent: u64, held: u64, worst: u64, max: u64) -> Fit {
    if spent.saturating_add(worst) > max {
        Fit::Never
    } else if spent.saturating_add(held).saturating_add(worst) > max {
        Fit::Busy
    } else {
        Fit::Yes
    }
}

/// Checks a reservation against one budget's cost and token limits.
fn check_fit(
    scope: &str,
    max_cost: Option<f64>,
    max_tokens: Option<u64>,
    spent: (f64, u64),
    held: &Reservation,
    worst: &Reservation,
) -> Result<(), Refused> {
    if let Some(max) = max_cost {
        let left = (max - spent.0).max(0.0);
        let what = format!(
            "this call's worst case (${:.4}) does not fit the {scope} cost budget of ${max} (${left:.4} left",
            worst.cost_usd
        );
        refusal(
            fit_cost(spent.0, held.cost_usd, worst.cost_usd, max),
            &what,
            &format!("${:.4}", held.cost_usd),
        )?;
    }
    if let Some(max) = max_tokens {
        let left = max.saturating_sub(spent.1);
        let what = format!(
            "this call's worst case ({} tokens) does not fit the {scope} token budget of {max} tokens ({left} left",
            worst.tokens
        );
        refusal(
            fit_tokens(spent.1, held.tokens, worst.tokens, max),
            &what,
            &format!("{} tokens", held.tokens),
        )?;
    }
    Ok(())
}

#[derive(Debug, Default)]
struct RunState {
    budget: RunBudget,
    usage: RunUsage,
    /// What the run's admitted, unsettled calls may still cost.
    held: Reservation,
}

/// The run-wide ledger and price table, shared by every trial.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    prices: BTreeMap<String, Price>,
    run: Mutex<RunState>,
}

impl Ledger {
    pub(crate) fn new(prices: BTreeMap<String, Price>) -> Self {
        Self {
            prices,
            run: Mutex::default(),
        }
    }

    /// Cost of a call, `None` when the model has no price.
    pub(crate) fn cost(&self, model: &str, tokens: &TokenCounts) -> Option<f64> {
        price_of(&self.prices, model).map(|p| p.cost(tokens))
    }

    /// The most a call of `model` with `input_bound` input tokens (each billed at the model's
    /// dearest input rate: plain, cache read or cache write) and `output_cap` output tokens
    /// can cost and count.
    pub(crate) fn worst_case(&self, model: &str, input_bound: u64, output_cap: u64) -> Reservation {
        let cost_usd = price_of(&self.prices, model).map_or(0.0, |p| {
            let input = p
                .input_per_mtok
                .max(p.cache_read_per_mtok)
                .max(p.cache_write_per_mtok);
            (input_bound as f64 * input + output_cap as f64 * p.output_per_mtok) / 1_000_000.0
        });
        Reservation {
            tokens: input_bound.saturating_add(output_cap),
            cost_usd,
        }
    }

    pub(crate) fn set_budget(&self, budget: RunBudget) {
        let mut run = lock(&self.run);
        run.budget = budget;
        let RunState { budget, usage, .. } = &mut *run;
        check_run(budget, usage);
    }

    pub(crate) fn usage(&self) -> RunUsage {
        lock(&self.run).usage.clone()
    }

    pub(crate) fn count_trial(&self) {
        lock(&self.run).usage.trials += 1;
    }

    /// Refuses when the run budget is spent or cannot hold `worst` beside the running calls;
    /// otherwise holds `worst` and counts the request.
    fn reserve(&self, worst: &Reservation) -> Result<(), Refused> {
        let mut run = lock(&self.run);
        if run.usage.budget_exhausted {
            return Err(Refused::Exhausted(
                run.usage
                    .exhausted_reason
                    .clone()
                    .unwrap_or_else(|| "run budget exhausted".into()),
            ));
        }
        let spent = (run.usage.cost_usd, run.usage.tokens.total());
        let b = run.budget;
        if let Err(refused) =
            check_fit("run", b.max_cost_usd, b.max_tokens, spent, &run.held, worst)
        {
            if let Refused::Exhausted(reason) = &refused {
                run.usage.budget_exhausted = true;
                run.usage.exhausted_reason = Some(reason.clone());
            }
            return Err(refused);
        }
        run.held.add(worst);
        run.usage.requests += 1;
        Ok(())
    }

    fn settle(&self, held: &Reservation, tokens: &TokenCounts, cost: f64) {
        let mut run = lock(&self.run);
        run.held.sub(held);
        let RunState { budget, usage, .. } = &mut *run;
        usage.tokens.add(tokens);
        usage.cost_usd += cost;
        check_run(budget, usage);
    }
}

fn check_run(budget: &RunBudget, usage: &mut RunUsage) {
    if usage.budget_exhausted {
        return;
    }
    let reason = if let Some(max) = budget.max_cost_usd.filter(|m| usage.cost_usd >= *m) {
        Some(format!("run cost budget of ${max} is spent"))
    } else {
        budget
            .max_tokens
            .filter(|m| usage.tokens.total() >= *m)
            .map(|max| format!("run token budget of {max} tokens is spent"))
    };
    if let Some(reason) = reason {
        usage.budget_exhausted = true;
        usage.exhausted_reason = Some(reason);
    }
}

/// One trial's meter: its budget, its usage, and the run ledger it adds to.
#[derive(Debug)]
pub(crate) struct Meter {
    budget: Budget,
    usage: Mutex<(TrialUsage, Reservation)>,
}

impl Meter {
    pub(crate) fn new(trial_id: &str, budget: Budget) -> Self {
        Self {
            budget,
            usage: Mutex::new((
                TrialUsage {
                    trial_id: trial_id.to_string(),
                    ..Default::default()
                },
                Reservation::default(),
            )),
        }
    }

    pub(crate) fn usage(&self) -> TrialUsage {
        lock(&self.usage).0.clone()
    }

    /// Admits a call whose worst case is `worst` when it fits what the trial's and the run's
    /// budgets have left beside their running calls: holds it on both and returns the call's
    /// 0-based number within the trial. A call that could never fit marks the trial exhausted.
    pub(crate) fn admit(&self, ledger: &Ledger, worst: &Reservation) -> Result<u64, Refused> {
        let mut guard = lock(&self.usage);
        let (u, held) = &mut *guard;
        if u.budget_exhausted {
            return Err(Refused::Exhausted(
                u.exhausted_reason
                    .clone()
                    .unwrap_or_else(|| "budget exhausted".into()),
            ));
        }
        if let Some(max) = self.budget.max_requests.filter(|m| u.requests >= *m) {
            let reason = format!("trial request budget of {max} requests is spent");
            exhaust(u, BudgetScope::Trial, &reason);
            return Err(Refused::Exhausted(reason));
        }
        let b = self.budget;
        let spent = (u.cost_usd, u.tokens.total());
        if let Err(refused) = check_fit("trial", b.max_cost_usd, b.max_tokens, spent, held, worst) {
            if let Refused::Exhausted(reason) = &refused {
                exhaust(u, BudgetScope::Trial, reason);
            }
            return Err(refused);
        }
        if let Err(refused) = ledger.reserve(worst) {
            if let Refused::Exhausted(reason) = &refused {
                exhaust(u, BudgetScope::Run, reason);
            }
            return Err(refused);
        }
        held.add(worst);
        u.requests += 1;
        Ok(u.requests - 1)
    }

    /// Gives back what an admitted call held when it never reached a model.
    pub(crate) fn release(&self, ledger: &Ledger, held: &Reservation) {
        ledger.settle(held, &TokenCounts::default(), 0.0);
        lock(&self.usage).1.sub(held);
    }

    /// Settles a finished call: gives back what it held and adds its real usage (to the trial
    /// and the run), marking the trial's budget exhausted if a limit is reached. Returns the
    /// call's cost (`None`: unpriced).
    pub(crate) fn settle(
        &self,
        ledger: &Ledger,
        held: &Reservation,
        model: &str,
        tokens: &TokenCounts,
    ) -> Option<f64> {
        let cost = ledger.cost(model, tokens);
        let c = cost.unwrap_or(0.0);
        ledger.settle(held, tokens, c);
        let mut guard = lock(&self.usage);
        let (u, reserved) = &mut *guard;
        reserved.sub(held);
        u.tokens.add(tokens);
        if cost.is_none() && tokens.total() > 0 {
            u.unpriced_calls += 1;
        }
        u.cost_usd += c;
        let m = u.per_model.entry(model.to_string()).or_default();
        m.requests += 1;
        m.tokens.add(tokens);
        m.cost_usd += c;
        if !u.budget_exhausted {
            let b = self.budget;
            if let Some(max) = b.max_tokens.filter(|m| u.tokens.total() >= *m) {
                exhaust(
                    u,
                    BudgetScope::Trial,
                    &format!("trial token budget of {max} tokens is spent"),
                );
            } else if let Some(max) = b.max_cost_usd.filter(|m| u.cost_usd >= *m) {
                exhaust(
                    u,
                    BudgetScope::Trial,
                    &format!("trial cost budget of ${max} is spent"),
                );
            }
        }
        cost
    }

    pub(crate) fn count_error(&self) {
        lock(&self.usage).0.errors += 1;
    }
}

fn exhaust(u: &mut TrialUsage, scope: BudgetScope, reason: &str) {
    u.budget_exhausted = true;
    u.exhausted_reason = Some(reason.to_string());
    u.exhausted_by = Some(scope);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(n: u64) -> TokenCounts {
        TokenCounts {
            input_tokens: n,
            ..Default::default()
        }
    }

    /// $1 per input token.
    fn dollar_per_token() -> Ledger {
        let mut prices = BTreeMap::new();
        prices.insert(
            "m".to_string(),
            Price {
                input_per_mtok: 1_000_000.0,
                output_per_mtok: 1_000_000.0,
                ..Default::default()
            },
        );
        Ledger::new(prices)
    }

    #[test]
    fn run_budget_stops_every_trial_once_spent() {
        let ledger = dollar_per_token();
        ledger.set_budget(RunBudget {
            max_cost_usd: Some(3.0),
            max_tokens: None,
        });
        let a = Meter::new("a", Budget::default());
        let b = Meter::new("b", Budget::default());
        let two = ledger.worst_case("m", 2, 0);
        assert_eq!(two.cost_usd, 2.0);
        assert_eq!(a.admit(&ledger, &two), Ok(0));
        assert_eq!(a.settle(&ledger, &two, "m", &tokens(2)), Some(2.0));
        let one = ledger.worst_case("m", 1, 0);
        assert_eq!(b.admit(&ledger, &one), Ok(0));
        b.settle(&ledger, &one, "m", &tokens(1));
        let run = ledger.usage();
        assert!(run.budget_exhausted);
        assert_eq!(run.cost_usd, 3.0);
        assert_eq!(run.requests, 2);
        let refused = a.admit(&ledger, &one).expect_err("the run budget is spent");
        assert!(
            matches!(&refused, Refused::Exhausted(r) if r.contains("run cost budget")),
            "{refused:?}"
        );
        let ua = a.usage();
        assert!(ua.budget_exhausted);
        assert_eq!(ua.exhausted_by, Some(BudgetScope::Run));
    }

    #[test]
    fn trial_token_budget_names_the_trial_scope() {
        let ledger = Ledger::default();
        let m = Meter::new(
            "t",
            Budget {
                max_tokens: Some(5),
                ..Default::default()
            },
        );
        let small = ledger.worst_case("unpriced", 1, 0);
        m.admit(&ledger, &small).expect("first call");
        // The provider counted more than the bound (its own framing): the real usage counts.
        assert_eq!(m.settle(&ledger, &small, "unpriced", &tokens(7)), None);
        let u = m.usage();
        assert_eq!(u.exhausted_by, Some(BudgetScope::Trial));
        assert_eq!(u.unpriced_calls, 1);
        assert!(m.admit(&ledger, &small).is_err());
        assert!(!ledger.usage().budget_exhausted);
        assert_eq!(ledger.usage().tokens.total(), 7);
    }

    #[test]
    fn a_call_is_admitted_only_when_its_worst_case_fits_beside_the_running_ones() {
        let ledger = dollar_per_token();
        let m = Meter::new(
            "t",
            Budget {
                max_cost_usd: Some(3.0),
                ..Default::default()
            },
        );
        let two = ledger.worst_case("m", 1, 1);
        assert_eq!(two.cost_usd, 2.0);
        assert_eq!(m.admit(&ledger, &two), Ok(0));
        // $2 held of $3: another $2 call is busy (it would fit alone), not exhausted.
        let busy = m.admit(&ledger, &two).expect_err("held");
        assert!(matches!(busy, Refused::Busy(_)), "{busy:?}");
        assert!(!m.usage().budget_exhausted);
        // The first call used only $1: settled, the second fits ($1 spent + $2 ≤ $3).
        m.settle(&ledger, &two, "m", &tokens(1));
        assert_eq!(m.admit(&ledger, &two), Ok(1));
        m.release(&ledger, &two);
        // A call whose worst case cannot fit what is left even alone ends the trial's budget.
        let four = ledger.worst_case("m", 2, 2);
        let never = m.admit(&ledger, &four).expect_err("$4 > $2 left");
        assert!(
            matches!(&never, Refused::Exhausted(r) if r.contains("worst case") && r.contains("max_tokens")),
            "{never:?}"
        );
        let u = m.usage();
        assert!(u.budget_exhausted);
        assert_eq!(u.exhausted_by, Some(BudgetScope::Trial));
        assert_eq!(u.requests, 2);
        assert!((u.cost_usd - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_run_cap_holds_across_trials_and_tokens() {
        let ledger = Ledger::default();
        ledger.set_budget(RunBudget {
            max_cost_usd: None,
            max_tokens: Some(100),
        });
        let trials: Vec<Meter> = (0..10)
            .map(|i| Meter::new(&format!("t{i}"), Budget::default()))
            .collect();
        let forty = ledger.worst_case("unpriced", 10, 30);
        let admitted = trials
            .iter()
            .filter(|m| m.admit(&ledger, &forty).is_ok())
            .count();
        assert_eq!(admitted, 2, "2 × 40 ≤ 100 < 3 × 40");
        assert!(!ledger.usage().budget_exhausted);
        assert_eq!(ledger.usage().requests, 2);
    }

    #[test]
    fn worst_case_bills_input_at_the_dearest_input_rate() {
        let mut prices = BTreeMap::new();
        prices.insert(
            "m".to_string(),
            Price {
                input_per_mtok: 3.0,
                output_per_mtok: 15.0,
                cache_read_per_mtok: 0.3,
                cache_write_per_mtok: 3.75,
            },
        );
        let ledger = Ledger::new(prices);
        let w = ledger.worst_case("m", 1_000_000, 1_000_000);
        assert!((w.cost_usd - 18.75).abs() < 1e-9, "{w:?}");
        assert_eq!(w.tokens, 2_000_000);
        assert_eq!(ledger.worst_case("free", 5, 5).cost_usd, 0.0);
    }
}
