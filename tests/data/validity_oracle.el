;;; validity_oracle.el --- Emacs's own reading of a memory.org with facts that changed, the expected data of tests/oracle/test_emacs_validity.py  -*- lexical-binding: t -*-
;; Usage: emacs --batch -Q -l validity_oracle.el FILE.org OUTPUT.json
;; For each headline: its line, :ID:, own tags, the validity properties as `org-entry-get' reads them, and whether
;; the agenda's tags view (match "LEVEL=2", Org's defaults: archived subtrees skipped) lists it.
(require 'org)
(require 'org-agenda)
(require 'json)

(let* ((file (expand-file-name (nth 0 command-line-args-left)))
       (output (nth 1 command-line-args-left))
       (listed (make-hash-table))
       (records '()))
  (setq command-line-args-left nil)
  (setq org-agenda-files (list file)
        org-agenda-window-setup 'current-window)
  (org-tags-view nil "LEVEL=2")
  (with-current-buffer org-agenda-buffer-name
    (goto-char (point-min))
    (while (not (eobp))
      (let ((marker (get-text-property (point) 'org-hd-marker)))
        (when marker
          (puthash (with-current-buffer (marker-buffer marker)
                     (save-excursion (goto-char marker) (line-number-at-pos)))
                   t listed)))
      (forward-line 1)))
  (with-current-buffer (find-file-noselect file)
    (org-mode)
    (org-map-entries
     (lambda ()
       (let ((line (line-number-at-pos)))
         (push `((line . ,line)
                 (level . ,(org-current-level))
                 (id . ,(org-entry-get nil "ID"))
                 (tags . ,(vconcat (org-get-tags nil t)))
                 (valid_from . ,(org-entry-get nil "VALID_FROM"))
                 (invalid_at . ,(org-entry-get nil "INVALID_AT"))
                 (supersedes . ,(org-entry-get nil "SUPERSEDES"))
                 (superseded_by . ,(org-entry-get nil "SUPERSEDED_BY"))
                 (listed . ,(if (gethash line listed) t :json-false)))
               records)))))
  (with-temp-file output
    (insert (json-encode (nreverse records)))
    (insert "\n")))
