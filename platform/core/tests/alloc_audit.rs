//! The audit allocator counts exactly the allocations of armed threads.

use rtdaq_platform::alloc_audit::{
    arm_current_thread, armed_allocations, disarm_current_thread, AuditAlloc,
};

#[global_allocator]
static ALLOC: AuditAlloc = AuditAlloc;

#[test]
fn counts_only_armed_threads() {
    let before = armed_allocations();
    // Unarmed threads are not counted.
    let v: Vec<u64> = (0..100).collect();
    std::hint::black_box(&v);
    std::thread::spawn(|| std::hint::black_box(vec![1u8; 64]))
        .join()
        .unwrap();
    assert_eq!(armed_allocations(), before);

    let counted = std::thread::spawn(|| {
        arm_current_thread();
        let start = armed_allocations();
        let a = std::hint::black_box(vec![0u8; 128]);
        let mut b = std::hint::black_box(Vec::<u32>::with_capacity(1));
        b.extend_from_slice(&[1, 2, 3, 4, 5]); // realloc
        let n = armed_allocations() - start;
        disarm_current_thread();
        drop((a, b));
        n
    })
    .join()
    .unwrap();
    assert!(
        counted >= 2,
        "two allocations and a reallocation, counted {counted}"
    );
}
