"""Data: each account's cloud storage (uploads, folders, /root/shared), cloud disks and hub mounts, and what they are
charged."""
