//! The store's revisions, attempts and their state: the part of the facade [`Store`] that
//! keeps operation-file revisions, attempt records with their pinned revision sets, and
//! per-attempt state (split from `mod.rs` to keep each file readable).

use super::*;

impl Store {
    // ---- revisions -----------------------------------------------------------------------

    /// Appends a revision for `key` (`"<integration>/<operation_id>"`) when `definition`'s
    /// hash or `contract_hash` differs from the latest revision; otherwise returns the latest.
    /// `created` tells which. Numbering starts at 1; revisions are never rewritten.
    pub fn sync_revision(
        &self,
        key: &str,
        contract_hash: &str,
        definition: &Value,
        source: &str,
    ) -> Result<(RevisionRecord, bool), StoreError> {
        check_key(key)?;
        let definition_hash = crate::contract::hash::definition_hash(definition);
        let (record, created) =
            self.sync_revision_unflushed(key, contract_hash, definition, definition_hash, source)?;
        if created {
            self.flush_now()?;
        }
        Ok((record, created))
    }

    /// [`Store::sync_revision`] with `definition`'s hash already computed, WITHOUT the flush:
    /// an appended revision is durable only after the caller's [`Store::flush_now`], which
    /// must come before the revision is reported or used (start-up syncs many files this
    /// way and flushes once).
    pub fn sync_revision_unflushed(
        &self,
        key: &str,
        contract_hash: &str,
        definition: &Value,
        definition_hash: String,
        source: &str,
    ) -> Result<(RevisionRecord, bool), StoreError> {
        check_key(key)?;
        let r = on!(self, b => b.sync_revision_unflushed(key, contract_hash, definition, definition_hash, source))?;
        if r.1 {
            self.sets
                .appended
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(r)
    }

    /// A number that grows whenever a revision is appended — by this process, or (shared
    /// store) by another one as far as the change listener has seen: latest revisions
    /// computed at one value are still the latest while it stays the same.
    pub fn revision_epoch(&self) -> u64 {
        let mine = self.sets.appended.load(std::sync::atomic::Ordering::SeqCst);
        match &*self.inner {
            Backend::Embedded(_) => mine,
            Backend::Postgres(p) => mine + p.subscribe().borrow().revisions,
        }
    }

    /// The latest revision of `key`, if any.
    pub fn latest_revision(&self, key: &str) -> Result<Option<RevisionRecord>, StoreError> {
        check_key(key)?;
        on!(self, b => b.latest_revision(key))
    }

    /// `"<integration>/<operation_id>"` → its latest revision number, for every key that has
    /// one (one scan: pinning compares these and reads only the revisions that moved).
    pub fn latest_revision_numbers(&self) -> Result<HashMap<String, u64>, StoreError> {
        on!(self, b => b.latest_revision_numbers())
    }

    /// Revision `n` of `key`, if it exists.
    pub fn revision(&self, key: &str, n: u64) -> Result<Option<RevisionRecord>, StoreError> {
        check_key(key)?;
        on!(self, b => b.revision(key, n))
    }

    /// The head of the latest revision of `key` ([`RevisionHead`]: no definition but its
    /// `initial_state`), if any.
    pub fn latest_revision_head(&self, key: &str) -> Result<Option<RevisionHead>, StoreError> {
        check_key(key)?;
        on!(self, b => b.latest_revision_head(key))
    }

    /// The head of revision `n` of `key` ([`RevisionHead`]), if it exists.
    pub fn revision_head(&self, key: &str, n: u64) -> Result<Option<RevisionHead>, StoreError> {
        check_key(key)?;
        on!(self, b => b.revision_head(key, n))
    }

    /// Every revision of `key`, oldest first.
    pub fn revisions(&self, key: &str) -> Result<Vec<RevisionRecord>, StoreError> {
        check_key(key)?;
        on!(self, b => b.revisions(key))
    }

    // ---- attempts ------------------------------------------------------------------------

    /// Inserts or replaces an attempt and its token index entry; durable when it returns.
    pub fn put_attempt(&self, a: &AttemptRecord) -> Result<(), StoreError> {
        check_attempt_id(&a.attempt_id)?;
        if a.token_hash.is_empty() {
            return Err(StoreError::Invalid("an attempt needs a token hash".into()));
        }
        if a.pins.is_empty() && a.revision_set.is_none() {
            let mut stored = a.clone();
            if let Some(fs) = &mut stored.final_state {
                self.scrub_states(fs);
            }
            return on!(self, b => b.put_attempt(&stored));
        }
        // The stored form names the revision set; the set itself is stored once.
        let mut stored = a.clone();
        if let Some(fs) = &mut stored.final_state {
            self.scrub_states(fs);
        }
        if !a.pins.is_empty() {
            let id = a.pins.id().to_string();
            self.put_revision_set(&id, &a.pins)?;
            stored.pins = Pins::default();
            stored.revision_set = Some(id);
        }
        on!(self, b => b.put_attempt(&stored))
    }

    /// A new attempt and its initial state (integration → state), durable when it returns:
    /// [`Store::put_attempt`] and [`Store::put_state`] with one flush for all of them on the
    /// embedded store.
    pub fn create_attempt(
        &self,
        a: &AttemptRecord,
        states: &BTreeMap<String, Map<String, Value>>,
    ) -> Result<(), StoreError> {
        check_attempt_id(&a.attempt_id)?;
        match &*self.inner {
            Backend::Embedded(e) => {
                for (integ, s) in states {
                    e.put_state_unflushed(&a.attempt_id, integ, s)?;
                }
                // Its flush covers the state written above.
                self.put_attempt(a)
            }
            Backend::Postgres(_) => {
                // The state rows reference the attempt's.
                self.put_attempt(a)?;
                for (integ, s) in states {
                    self.put_state(&a.attempt_id, integ, s)?;
                }
                Ok(())
            }
        }
    }

    /// Stores revision set `id` unless this process knows it is stored.
    fn put_revision_set(&self, id: &str, pins: &Pins) -> Result<(), StoreError> {
        if lock(&self.sets.known).contains_key(id) {
            return Ok(());
        }
        on!(self, b => b.put_revision_set(id, pins))?;
        lock(&self.sets.known).insert(id.to_string(), pins.clone());
        Ok(())
    }

    /// A record as read → as used: the revision set it names replaces the name (records
    /// written before revision sets carry their pins and are returned as they are).
    fn resolve(&self, mut a: AttemptRecord) -> Result<AttemptRecord, StoreError> {
        let Some(id) = a.revision_set.take() else {
            return Ok(a);
        };
        if let Some(p) = lock(&self.sets.known).get(&id) {
            a.pins = p.clone();
            return Ok(a);
        }
        let map = on!(self, b => b.revision_set(&id))?.ok_or_else(|| StoreError::Corrupt {
            key: format!("attempt {}", a.attempt_id),
            message: format!("names revision set {id}, which is not in the store"),
        })?;
        let pins = Pins::with_id(map, id.clone());
        lock(&self.sets.known).insert(id, pins.clone());
        a.pins = pins;
        Ok(a)
    }

    /// The attempt `id`, if it exists.
    pub fn attempt(&self, id: &str) -> Result<Option<AttemptRecord>, StoreError> {
        on!(self, b => b.attempt(id))?
            .map(|a| self.resolve(a))
            .transpose()
    }

    /// Every attempt, ordered by id.
    pub fn attempts(&self) -> Result<Vec<AttemptRecord>, StoreError> {
        on!(self, b => b.attempts())?
            .into_iter()
            .map(|a| self.resolve(a))
            .collect()
    }

    /// The attempt whose capability token hashes to `token_hash`.
    pub fn attempt_by_token_hash(
        &self,
        token_hash: &str,
    ) -> Result<Option<AttemptRecord>, StoreError> {
        on!(self, b => b.attempt_by_token_hash(token_hash))?
            .map(|a| self.resolve(a))
            .transpose()
    }

    // ---- state ---------------------------------------------------------------------------

    /// The attempt's state: integration → state object (only integrations that have one).
    pub fn state(
        &self,
        attempt_id: &str,
    ) -> Result<BTreeMap<String, Map<String, Value>>, StoreError> {
        check_attempt_id(attempt_id)?;
        on!(self, b => b.state(attempt_id))
    }

    /// Writes one integration's whole state outside a call (initial state at attempt
    /// creation); durable when it returns. Calls change state through [`Store::record_call`].
    pub fn put_state(
        &self,
        attempt_id: &str,
        integration: &str,
        state: &Map<String, Value>,
    ) -> Result<(), StoreError> {
        check_attempt_id(attempt_id)?;
        on!(self, b => b.put_state(attempt_id, integration, state))
    }

    /// Removes every state key of the attempt, then scans again and returns how many remain:
    /// `0` means the cleanup is verified. Evidence is kept.
    pub fn clear_state(&self, attempt_id: &str) -> Result<usize, StoreError> {
        check_attempt_id(attempt_id)?;
        on!(self, b => b.clear_state(attempt_id))
    }
}
