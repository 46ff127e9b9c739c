-- id: filesystem_error
-- detects: storage failing under the job: block-device I/O errors, local filesystem errors, read-only remounts and
--          XFS shutdowns, an md RAID array that stopped, NFS servers not responding, Lustre client errors, and the
--          application's own I/O errors (EIO, ENOSPC, EROFS, ESTALE, EDQUOT while writing a checkpoint). Warnings that
--          only mention such an errno are not used. A RAID member failure the array survives only confirms.
-- domain: software/filesystem
-- inputs: events(kind in block_io_error, fs_error, raid_failed, raid_member_failure, nfs_error, lustre_client_error, io_error)
SELECT attempt_id, event_id, 'filesystem_error' AS rule_id, CASE WHEN kind = 'raid_member_failure' THEN 'confirmation' ELSE 'root' END AS role, 'software' AS domain, 'filesystem' AS subdomain,
       node AS culprit_node, rank AS culprit_rank, NULL AS gpu, CASE WHEN rank IS NOT NULL THEN 'rank' ELSE 'node' END AS granularity,
       CASE
           WHEN kind = 'raid_failed' OR (kind = 'fs_error' AND code_text IN ('remount_ro', 'shutdown')) THEN strength('filesystem.no_more_writes')  -- no more writes
           WHEN kind IN ('fs_error', 'block_io_error', 'io_error') THEN strength('filesystem.io_error')
           ELSE strength('filesystem.network_client')  -- NFS / Lustre clients retry: the outage is real, whether it ended the job less so
       END AS strength, ts,
       printf('%s on %s: %s',
              CASE kind WHEN 'block_io_error' THEN 'block I/O error' WHEN 'fs_error' THEN 'filesystem error'
                        WHEN 'raid_failed' THEN 'RAID array stopped' WHEN 'raid_member_failure' THEN 'RAID member failed'
                        WHEN 'nfs_error' THEN 'NFS server not responding' WHEN 'lustre_client_error' THEN 'Lustre client error'
                        ELSE 'I/O error' END,
              coalesce(node, '?'), left(message, 140)) AS summary,
       'investigate' AS action
FROM events
WHERE kind IN ('block_io_error', 'fs_error', 'raid_failed', 'raid_member_failure', 'nfs_error', 'lustre_client_error')
   OR (kind = 'io_error' AND message NOT ILIKE '%warning%')
