//! The plan table's CPU tests: buckets, the text format and its rejections, the tuner's
//! selection rule, and the shipped tables against the cost model.

use super::*;

fn measured(plan: TablePlan, times: &[f64], verified: bool) -> Measurement {
    Measurement { plan, times_us: times.iter().map(|&t| Some(t)).collect(), verified }
}

/// An entry of `plan` for `bucket`, the model's plans all `Wide(None)`.
fn entry(bucket: Bucket, plan: TablePlan, plan_us: f64, model_us: f64) -> TableEntry {
    TableEntry { plan, plan_us, model_us, model_plans: vec![TablePlan::Wide(None); bucket.shapes().len()] }
}

fn sample_table() -> PlanTable {
    let mut entries = BTreeMap::new();
    let buckets = [
        Bucket { m: 0, n: 2, k: 1, repacked: false },
        Bucket { m: 7, n: 2, k: 2, repacked: false },
        Bucket { m: 12, n: 3, k: 2, repacked: false },
    ];
    entries.insert(buckets[0], entry(buckets[0], TablePlan::Decode, 9.0, 11.0));
    entries.insert(buckets[1], entry(buckets[1], TablePlan::Narrow(Some(4)), 30.0, 40.0));
    entries.insert(buckets[2], entry(buckets[2], TablePlan::Model, 12.5, 12.5));
    PlanTable { device: "NVIDIA H200".into(), sms: 132, entries }
}

#[test]
fn buckets_cover_every_shape_and_their_shapes_lie_inside() {
    let b = |m, n, k| Bucket { m, n, k, repacked: false };
    assert_eq!(Bucket::of(1, 1, 1, false), b(0, 0, 0));
    assert_eq!(Bucket::of(2, 512, 512, false), b(1, 0, 0));
    assert_eq!(Bucket::of(33, 513, 513, false), b(6, 1, 1));
    assert_eq!(Bucket::of(16384, 32768, 8192, false), b(14, 3, 2));
    assert_eq!(Bucket::of(1 << 30, 1 << 30, 1 << 30, true), Bucket { repacked: true, ..b(14, 4, 3) });
    let all: Vec<Bucket> = Bucket::all().collect();
    assert_eq!(all.len(), 15 * 5 * 4 * 2);
    for bucket in all {
        let shapes = bucket.shapes();
        assert!(!shapes.is_empty() && shapes.len() <= 8);
        for (m, n, k) in shapes {
            assert_eq!(Bucket::of(m, n, k, bucket.repacked), bucket, "{m}×{n}×{k}");
            assert!(n.is_multiple_of(8), "{m}×{n}×{k}");
            // Packed operands: K decides whether they are read in place.
            assert_eq!(k.is_multiple_of(8), !bucket.repacked, "{m}×{n}×{k}");
        }
    }
}

#[test]
fn plans_print_and_parse_and_apply_their_knobs() {
    let every = TablePlan::candidates(Bucket { m: 0, n: 0, k: 0, repacked: false });
    assert!(every.contains(&TablePlan::Decode) && every.contains(&TablePlan::Cuda));
    for plan in every {
        assert_eq!(TablePlan::parse(&plan.to_string()), Some(plan));
    }
    for bad in ["", "wide/", "wide/k", "narrow/kx", "pingpong/k2", "Decode", "widek2"] {
        assert_eq!(TablePlan::parse(bad), None, "{bad}");
    }
    let big = TablePlan::candidates(Bucket { m: 6, n: 0, k: 0, repacked: false });
    assert!(!big.contains(&TablePlan::Decode) && !big.contains(&TablePlan::Cuda));
    let repacked = TablePlan::candidates(Bucket { m: 0, n: 0, k: 0, repacked: true });
    assert!(!repacked.contains(&TablePlan::Decode) && repacked.contains(&TablePlan::Gather));
    let p = GemmProblem::new(100, 4096, 4096);
    let narrow = TablePlan::Narrow(Some(4)).apply(&p);
    assert_eq!(
        (narrow.cores, narrow.consumers, narrow.tile_width),
        (Cores::Tensor, Consumers::Cooperative, TileWidth::Narrow)
    );
    assert_eq!((narrow.clusters, narrow.k_split), (Clusters::Off, KSplit::Ways(4)));
    assert_eq!(TablePlan::PingPong.apply(&p).consumers, Consumers::PingPong);
    assert_eq!(TablePlan::Wide(None).apply(&p).k_split, KSplit::Auto);
    assert_eq!(TablePlan::Decode.apply(&p).cores, Cores::Decode);
    assert_eq!(TablePlan::Model.apply(&p), p);
}

#[test]
fn a_table_round_trips_through_its_text() {
    let table = sample_table();
    let text = table.to_text();
    assert_eq!(PlanTable::parse(&text).unwrap(), table);
    assert_eq!(table.entry(1, 4000, 1000, false).unwrap().plan, TablePlan::Decode);
    assert_eq!(table.entry(100, 5000, 5000, false).unwrap().plan, TablePlan::Narrow(Some(4)));
    assert!(table.entry(100, 5000, 50000, false).is_none());
    assert!(table.entry(1, 4000, 1000, true).is_none());
}

/// Every single-character corruption of an entry line is rejected (the checksum, or the field
/// checks where a change keeps the sum by chance, which FNV-1a makes vanishingly rare).
#[test]
fn a_corrupted_entry_is_rejected() {
    let text = sample_table().to_text();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate().skip(3) {
        for (at, c) in line.char_indices() {
            for replacement in ['0', '7', 'a', '\t', '.'] {
                if replacement == c {
                    continue;
                }
                let mut edited = line.to_string();
                edited.replace_range(at..at + c.len_utf8(), &replacement.to_string());
                let mut all = lines.clone();
                all[i] = &edited;
                let err = PlanTable::parse(&all.join("\n")).expect_err(&edited);
                assert!(err.to_string().contains(&format!("line {}", i + 1)), "{err}");
            }
        }
    }
    // The same entries under another device's name do not check.
    let moved = text.replace("NVIDIA H200", "NVIDIA H100 80GB HBM3");
    assert!(PlanTable::parse(&moved).is_err());
    // A bucket twice, a missing header.
    let twice = format!("{text}{}\n", lines[3]);
    assert!(PlanTable::parse(&twice).unwrap_err().to_string().contains("twice"));
    assert!(PlanTable::parse(&lines[1..].join("\n")).is_err());
}

/// An entry whose fields are wrong but whose checksum was recomputed (edited by a tool) is
/// still rejected by the field checks: a plan the bucket cannot run, a plan that does not
/// beat the model, a model entry with two times, a bad time.
#[test]
fn a_wrong_plan_is_rejected_even_with_a_valid_checksum() {
    let base = sample_table();
    let (b6, b4, b1) = (
        Bucket { m: 6, n: 0, k: 0, repacked: false },
        Bucket { m: 4, n: 0, k: 0, repacked: false },
        Bucket { m: 1, n: 0, k: 0, repacked: false },
    );
    let mut short = entry(b1, TablePlan::Gather, 5.0, 9.0);
    short.model_plans.pop();
    let wrong = [
        (b6, entry(b6, TablePlan::Decode, 5.0, 9.0)),
        (b4, entry(b4, TablePlan::Cuda, 5.0, 9.0)),
        (b1, entry(b1, TablePlan::Wide(Some(17)), 5.0, 9.0)),
        (b1, entry(b1, TablePlan::Gather, 9.0, 9.1)),
        (b1, entry(b1, TablePlan::Model, 8.0, 9.0)),
        (b1, entry(b1, TablePlan::Gather, f64::NAN, 9.0)),
        (b1, entry(b1, TablePlan::Gather, -1.0, 9.0)),
        (b1, short),
        (Bucket { repacked: true, ..b1 }, entry(Bucket { repacked: true, ..b1 }, TablePlan::Decode, 5.0, 9.0)),
    ];
    for (bucket, entry) in wrong {
        let mut table = base.clone();
        table.entries.insert(bucket, entry.clone());
        assert!(PlanTable::parse(&table.to_text()).is_err(), "{bucket:?} {entry:?}");
    }
    let b15 = Bucket { m: 15, n: 0, k: 0, repacked: false };
    let outside = PlanTable {
        entries: [(b15, entry(Bucket { m: 14, n: 0, k: 0, repacked: false }, TablePlan::Model, 1.0, 1.0))].into(),
        ..base.clone()
    };
    let mut bad_class = base.to_text();
    bad_class.push_str(outside.to_text().lines().last().unwrap());
    assert!(PlanTable::parse(&bad_class).is_err());
}

#[test]
fn the_tuner_keeps_a_fast_wrong_plan_out_and_needs_a_clear_gain() {
    let bucket = Bucket { m: 3, n: 2, k: 2, repacked: false };
    let model = measured(TablePlan::Model, &[10.0, 20.0], true);
    // The fastest candidate failed its float64 check: never chosen.
    let wrong = measured(TablePlan::Gather, &[1.0, 2.0], false);
    let decode = measured(TablePlan::Decode, &[8.0, 16.0], true);
    let plans = || vec![TablePlan::Wide(None); 2];
    let e = choose_entry(bucket, &[model.clone(), wrong.clone(), decode.clone()], plans()).unwrap();
    assert_eq!((e.plan, e.plan_us, e.model_us), (TablePlan::Decode, 11.314, 14.142));
    // Within the margin of the model: the model stays.
    let close = measured(TablePlan::Cuda, &[9.9, 19.9], true);
    assert_eq!(choose_entry(bucket, &[model.clone(), close], plans()).unwrap().plan, TablePlan::Model);
    // A candidate missing a shape, or not admissible in the bucket, is not a winner.
    let partial = Measurement { plan: TablePlan::Cuda, times_us: vec![Some(1.0), None], verified: true };
    assert_eq!(choose_entry(bucket, &[model.clone(), partial], plans()).unwrap().plan, TablePlan::Model);
    let big = Bucket { m: 9, n: 2, k: 2, repacked: false };
    assert_eq!(choose_entry(big, &[model.clone(), decode.clone()], plans()).unwrap().plan, TablePlan::Model);
    // No verified model: no entry at all.
    assert!(choose_entry(bucket, &[measured(TablePlan::Model, &[10.0, 20.0], false), decode], plans()).is_err());
    // Whatever it chose passes the table's own checks.
    let plans = vec![TablePlan::Decode; bucket.shapes().len()];
    let e = choose_entry(bucket, &[model, measured(TablePlan::Narrow(Some(2)), &[3.0, 7.0], true)], plans).unwrap();
    let table = PlanTable { device: "d".into(), sms: 1, entries: [(bucket, e)].into() };
    assert_eq!(PlanTable::parse(&table.to_text()).unwrap(), table);
}

/// The shipped tables parse, and the cost model still makes the choices it was measured
/// making on every shape of every bucket (else the table is stale: re-tune), and every bucket
/// is there.
#[test]
fn the_shipped_tables_parse_and_agree_with_the_cost_model() {
    for text in SHIPPED {
        let table = PlanTable::parse(text).unwrap();
        assert_eq!(table.entries.len(), Bucket::all().count(), "{}: every bucket", table.device);
        for (bucket, entry) in &table.entries {
            assert!(entry.plan_us <= entry.model_us, "{bucket:?}");
            for ((m, n, k), recorded) in bucket.shapes().into_iter().zip(&entry.model_plans) {
                // Packed shapes: K alone decides whether the operands are repacked.
                let now = model_plan(m, n, k, "bf16", "bf16", table.sms).unwrap();
                assert_eq!(now, *recorded, "{}: {m}×{n}×{k} — the cost model changed, re-tune", table.device);
            }
        }
    }
    assert!(shipped_table("NVIDIA H200", 132).is_some());
    assert!(shipped_table("NVIDIA H200", 78).is_none());
}
