//! Reading one thread's folder back (see the layout in [the module docs](super)).

use super::*;

/// Adds the links of `children.jsonl` (its first `committed_len` bytes) to `record`: the
/// latest line of a child wins.
fn read_children(
    dir: &Path,
    record: &mut ThreadRecord,
    committed_len: u64,
) -> Result<(), StoreError> {
    let children_path = dir.join("children.jsonl");
    let bytes = read_all(&children_path)?;
    let lines: Vec<ChildLink> = parse_lines(
        &children_path,
        committed(&children_path, &bytes, committed_len)?,
    )?;
    for link in lines {
        match record
            .children
            .iter_mut()
            .find(|c| c.thread_id == link.thread_id)
        {
            Some(existing) => *existing = link,
            None => record.children.push(link),
        }
    }
    Ok(())
}

/// A thread's record alone, from its folder (`None` when it has none): `state.json` and its
/// children, not its history.
pub(super) fn load_record(dir: &Path) -> Result<Option<ThreadRecord>, StoreError> {
    let state_path = dir.join("state.json");
    let bytes = match fs::read(&state_path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(&state_path, e)),
    };
    let state: StateFile = serde_json::from_slice(&bytes).map_err(|e| corrupt(&state_path, e))?;
    let mut record = state.record;
    if state.format >= FORMAT {
        read_children(dir, &mut record, state.children_bytes)?;
    }
    Ok(Some(record))
}

/// One thread's folder, loaded.
pub(super) fn load_thread(dir: &Path) -> Result<(ThreadData, OnDisk), StoreError> {
    let state_path = dir.join("state.json");
    let state: StateFile =
        serde_json::from_slice(&fs::read(&state_path).map_err(|e| io_err(&state_path, e))?)
            .map_err(|e| corrupt(&state_path, e))?;
    let mut record = state.record;

    let entries_path = dir.join("entries.jsonl");
    let bytes = read_all(&entries_path)?;
    let entries: Vec<HistoryEntry> = parse_lines(
        &entries_path,
        committed(&entries_path, &bytes, state.entries_bytes)?,
    )?;
    if entries.len() as u64 != record.history_len {
        return Err(corrupt(
            &entries_path,
            format!(
                "holds {} committed entries, the record says {}",
                entries.len(),
                record.history_len
            ),
        ));
    }

    let processed_path = dir.join("processed.txt");
    let bytes = read_all(&processed_path)?;
    let processed: HashSet<InputId> =
        BufReader::new(committed(&processed_path, &bytes, state.processed_bytes)?)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| InputId::new(l).ok())
            .collect();

    let mut disk = OnDisk {
        current_format: state.format >= FORMAT,
        ..OnDisk::default()
    };
    let outbox = if disk.current_format {
        read_children(dir, &mut record, state.children_bytes)?;
        disk.children = record.children.clone();

        let outbox_path = dir.join("outbox.jsonl");
        let bytes = read_all(&outbox_path)?;
        let mut outbox: Vec<PendingEffect> = Vec::new();
        let head = committed(&outbox_path, &bytes, state.outbox_bytes)?;
        let mut done: HashSet<EffectId> = HashSet::new();
        for line in parse_lines::<OutboxLine>(&outbox_path, head)? {
            match line {
                OutboxLine::Add(effect) => outbox.push(*effect),
                OutboxLine::Done(ids) => done.extend(ids),
            }
        }
        // After the committed part only `done` lines count; an unfinished commit's `add` lines
        // and a torn last line are ignored.
        for line in bytes[head.len()..].split(|b| *b == b'\n') {
            if let Ok(OutboxLine::Done(ids)) = serde_json::from_slice::<OutboxLine>(line) {
                done.extend(ids);
            }
        }
        outbox.retain(|e| !done.contains(&e.id));
        disk.outbox_end = bytes.len() as u64;
        outbox
    } else {
        state.outbox
    };
    disk.lengths = Lengths {
        entries: state.entries_bytes,
        processed: state.processed_bytes,
        children: state.children_bytes,
        outbox: state.outbox_bytes,
        events: state.events_bytes,
    };
    let data = ThreadData {
        record,
        entries: Arc::new({
            let mut list = Vec::new();
            crate::store::memory::append(&mut list, entries.into_iter().map(Arc::new));
            list
        }),
        processed,
        outbox,
    };
    Ok((data, disk))
}
