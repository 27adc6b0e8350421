;;; agenda_oracle.el --- Emacs's own agenda of one sample file, the expected data of tests/orgquery/test_agenda.py  -*- lexical-binding: t -*-
;; Usage: emacs --batch -Q -l agenda_oracle.el FILE.org TODAY START SPAN OUTPUT
;; TODAY and START are YYYY-MM-DD.  Org's defaults are kept, except: the day is fixed (`org-today'),
;; the agenda starts on START rather than on a Monday, and the time grid (decoration) is off.
(require 'org)
(require 'org-agenda)
(require 'calendar)

(defun agenda-oracle--absolute (iso)
  "The absolute day number of the date ISO (YYYY-MM-DD)."
  (let ((parts (mapcar #'string-to-number (split-string iso "-"))))
    (calendar-absolute-from-gregorian (list (nth 1 parts) (nth 2 parts) (nth 0 parts)))))

(let* ((args command-line-args-left)
       (file (expand-file-name (nth 0 args)))
       (today (agenda-oracle--absolute (nth 1 args)))
       (start (agenda-oracle--absolute (nth 2 args)))
       (span (string-to-number (nth 3 args)))
       (output (nth 4 args)))
  (setq command-line-args-left nil)
  (advice-add 'org-today :override (lambda () today))
  (setq org-agenda-files (list file)
        org-agenda-start-on-weekday nil
        org-agenda-use-time-grid nil
        org-agenda-window-setup 'current-window)
  (org-agenda-list nil start span)
  (with-current-buffer org-agenda-buffer-name
    (write-region (buffer-substring-no-properties (point-min) (point-max)) nil output)))
