//! Types that only appear behind pointers in the provider-private interface
//! (`IBVERBS_PRIVATE_34`, libibverbs/driver.h and cmd_ioctl.h) and in `verbs_context`.
//!
//! rdma-core providers such as libmlx5 and libefa pass these to the private entry points;
//! this library never looks inside them, so they are opaque. Kernel uverbs command and
//! response structures (`struct ibv_create_qp`, `struct ib_uverbs_create_qp_resp`, …) are
//! passed as `*mut c_void` in the entry points' signatures.

opaque!(
    /// `struct verbs_device` (driver.h 290–297): a provider's device, `ibv_device` first.
    verbs_device,
    /// `struct verbs_device_ops` (driver.h 269–287): what a provider registers.
    verbs_device_ops,
    /// `struct verbs_context_ops` (driver.h 311–448): a provider's full operation table.
    verbs_context_ops,
    /// `struct verbs_sysfs_dev` (driver.h 249–266): a device found in sysfs.
    verbs_sysfs_dev,
    /// `struct verbs_xrcd` (driver.h 111–115).
    verbs_xrcd,
    /// `struct verbs_srq` (driver.h 117–123).
    verbs_srq,
    /// `struct verbs_qp` (driver.h 159–166).
    verbs_qp,
    /// `struct verbs_cq` (driver.h 169–174).
    verbs_cq,
    /// `struct verbs_mr` (driver.h 148–152).
    verbs_mr,
    /// `struct verbs_dm` (driver.h 187–190).
    verbs_dm,
    /// `struct verbs_flow_action` (driver.h 181–185).
    verbs_flow_action,
    /// `struct verbs_counters` (driver.h 299–302).
    verbs_counters,
    /// `struct verbs_ex_private`: libibverbs-internal, behind `verbs_context::priv`.
    verbs_ex_private,
    /// `struct ibv_command_buffer` (cmd_ioctl.h 85–109): a kernel ioctl being built.
    ibv_command_buffer,
    /// `struct ibv_flow_action_esp_attr` (verbs.h 1909–1924): IPsec flow action attributes.
    ibv_flow_action_esp_attr,
);
