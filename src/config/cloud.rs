//! What the fleet file's cloud pools (`backend = "ec2"`, `"lambda"`) share: a table of their
//! own that only their backend may have, and the seller that backend buys from.

use super::fleet::{Backend, PoolConfig};

/// Pool `p`'s table for `backend` (`[pools.ec2]`), checked: present exactly when the pool is
/// driven by `backend`, whose capacity `seller` sells (`provider`). `Ok(None)`: another
/// backend's pool without the table. `needs` says what the table must give, for the error.
pub fn table_for<'a, T>(
    p: &PoolConfig,
    name: &str,
    table: Option<&'a T>,
    backend: Backend,
    seller: (&str, &str),
    needs: &str,
) -> Result<Option<&'a T>, String> {
    let Some(t) = super::pool::backend_table(p, name, table, backend, needs)? else {
        return Ok(None);
    };
    let (provider, company) = seller;
    if p.provider != provider {
        return Err(format!(
            "{name}: backend = \"{}\" buys from {company}: provider = \"{provider}\" (got \"{}\")",
            backend.name(),
            p.provider
        ));
    }
    Ok(Some(t))
}
