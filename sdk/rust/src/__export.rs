//! What `export_scenario!` expands to calls: the scenario's state lives here, created on
//! the first call after `describe`, when the run's parameters are known.

use std::any::Any;
use std::cell::RefCell;

use crate::{Description, Hooks, Scenario};

thread_local! {
    static STATE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

pub fn describe<T: Scenario>() -> Description {
    let mut d = T::describe();
    if T::ON_RESPONSE {
        d.hooks |= Hooks::ON_RESPONSE;
    }
    if T::STOP {
        d.hooks |= Hooks::STOP;
    }
    if T::NEXT_PHASE {
        d.hooks |= Hooks::NEXT_PHASE;
    }
    if T::SESSIONS {
        d.hooks |= Hooks::SESSIONS;
    }
    d
}

pub fn with_state<T: Scenario, R>(
    f: impl FnOnce(&mut T) -> Result<R, String>,
) -> Result<R, String> {
    STATE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(Box::new(T::new()?));
        }
        let state = slot
            .as_mut()
            .and_then(|s| s.downcast_mut::<T>())
            .ok_or("export_scenario! was used for two different types")?;
        f(state)
    })
}
