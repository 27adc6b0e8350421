;;; cortex.el --- A cortex store from Emacs, over its language server  -*- lexical-binding: t; -*-

;; Version: 0.1
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: outlines, tools

;;; Commentary:

;; What the language server `cortex lsp' offers that LSP's own requests express poorly, as Emacs
;; commands on eglot's connection to that server (start it with M-x eglot in an Org buffer of the
;; store's folder; `cortex-setup' tells eglot how, and makes a folder holding a cortex working copy,
;; `.cortex/copy', a project, which eglot needs when the folder is under no version control):
;;
;;   M-x cortex-search    search as `cortex search' does, pick a hit, go to it
;;   M-x cortex-snapshot  record the saved files as a snapshot
;;   M-x cortex-log       the snapshots, newest first
;;   M-x cortex-history   the versions of the headline at point (its :ID:), with their patches
;;   M-x cortex-diff      what changed in this file since a snapshot, in a diff-mode buffer
;;   M-x cortex-review    the pending proposals, then accept or reject one
;;
;; Links, references, hover, diagnostics and completion are eglot's own (xref, eldoc, flymake).

;;; Code:

(require 'cl-lib)
(require 'eglot)
(require 'jsonrpc)
(require 'outline)
(require 'diff-mode)
(require 'url-parse)
(require 'url-util)
(require 'xref)

(defgroup cortex nil
  "Commands of a cortex store, over its language server."
  :group 'tools
  :prefix "cortex-")

(defcustom cortex-program "cortex"
  "The `cortex' program eglot starts."
  :type 'string)

(defcustom cortex-server-arguments '("lsp")
  "The arguments of `cortex-program' that start its language server.
Add \"--store\" DIR and \"--org\" DIR to serve a store other than the default."
  :type '(repeat string))

;;;###autoload
(defun cortex-project (dir)
  "The project of DIR when a folder above it is a cortex working copy.
That is the folder holding `.cortex/copy' (a store's Org folder is one), as a
transient project: eglot starts one server for all its files, version
controlled or not."
  (let ((root (locate-dominating-file dir ".cortex/copy")))
    (and root (cons 'transient (expand-file-name root)))))

;;;###autoload
(defun cortex-setup ()
  "Make \\[eglot] in an Org buffer start `cortex lsp'.
That is `cortex-program' with `cortex-server-arguments', for the project
`cortex-project' finds."
  (interactive)
  (add-hook 'project-find-functions #'cortex-project)
  (setq eglot-server-programs (cl-remove 'org-mode eglot-server-programs :key #'car-safe))
  (push (cons 'org-mode (cons cortex-program cortex-server-arguments)) eglot-server-programs))

(defun cortex--server ()
  "Eglot's connection to `cortex lsp' for this buffer."
  (or (eglot-current-server)
      (user-error "No cortex server for this buffer: M-x eglot in an Org buffer of the store's folder")))

(defun cortex--request (method params)
  "The server's answer to METHOD with PARAMS; a refusal is a `user-error'."
  (condition-case failure
      (jsonrpc-request (cortex--server) method params)
    (jsonrpc-error
     (user-error "cortex: %s" (or (alist-get 'jsonrpc-error-message (cdr failure)) (cadr failure))))))

(defun cortex--command (name &rest arguments)
  "The answer of the server's command NAME run with ARGUMENTS."
  (cortex--request :workspace/executeCommand (list :command name :arguments (vconcat arguments))))

(defun cortex--uri (file)
  "The file: URI of FILE, as eglot names the documents it opens."
  (concat "file://" (url-hexify-string (file-truename file) url-path-allowed-chars)))

(defun cortex--file (uri)
  "The file a file: URI names."
  (decode-coding-string (url-unhex-string (url-filename (url-generic-parse-url uri))) 'utf-8))

(defun cortex--show (name text mode)
  "Show TEXT in the buffer NAME, read-only, in MODE; the buffer."
  (let ((buffer (get-buffer-create name)))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert text)
        (unless (string-suffix-p "\n" text) (insert "\n")))
      (funcall mode)
      (setq buffer-read-only t)
      (goto-char (point-min)))
    (display-buffer buffer)
    buffer))

(defun cortex--hit-label (hit)
  "How a workspace symbol HIT reads: its heading, its file and line."
  (let ((location (plist-get hit :location)))
    (format "%s  %s:%d" (plist-get hit :name)
            (or (plist-get hit :containerName) (cortex--file (plist-get location :uri)))
            (1+ (plist-get (plist-get (plist-get location :range) :start) :line)))))

(defun cortex--ranked (candidates)
  "A completion table of CANDIDATES that keeps their order."
  (lambda (string predicate action)
    (if (eq action 'metadata)
        '(metadata (display-sort-function . identity) (cycle-sort-function . identity))
      (complete-with-action action candidates string predicate))))

;;;###autoload
(defun cortex-search (query)
  "Search the store for QUERY as `cortex search' does; go to the hit picked.
The hits are the server's workspace symbols, best first; \\[xref-go-back] returns."
  (interactive (list (read-string "cortex search: ")))
  (let* ((hits (append (cortex--request :workspace/symbol (list :query query)) nil))
         (choices (mapcar (lambda (hit) (cons (cortex--hit-label hit) hit)) hits)))
    (unless choices
      (user-error "cortex: nothing found for %S" query))
    (let* ((chosen (cdr (assoc (completing-read "Go to: " (cortex--ranked choices) nil t) choices)))
           (location (plist-get chosen :location)))
      (xref-push-marker-stack)
      (find-file (cortex--file (plist-get location :uri)))
      (goto-char (point-min))
      (forward-line (plist-get (plist-get (plist-get location :range) :start) :line))
      chosen)))

;;;###autoload
(defun cortex-snapshot (message)
  "Snapshot the Org folder's saved files with MESSAGE; say its name."
  (interactive (progn (save-some-buffers) (list (read-string "Snapshot message: "))))
  (let ((answer (cortex--command "cortex.snapshot" message)))
    (message "cortex: %s" answer)
    answer))

;;;###autoload
(defun cortex-log (&optional limit)
  "Show the newest LIMIT snapshots (20 unless a prefix argument says)."
  (interactive "P")
  (cortex--show "*cortex log*" (cortex--command "cortex.log" (if limit (prefix-numeric-value limit) 20))
                #'special-mode))

(defun cortex--id-at-point ()
  "The :ID: of the Org headline at point, if any."
  (save-excursion
    (when (re-search-backward "^\\*+ " nil t)
      (let ((end (save-excursion (or (outline-next-heading) (point-max)))))
        (when (re-search-forward "^[ \t]*:ID:[ \t]+\\(\\S-+\\)" end t)
          (match-string-no-properties 1))))))

;;;###autoload
(defun cortex-history (org-id)
  "Show the versions of the headline with :ID: ORG-ID, with their patches.
Interactively, the headline at point."
  (interactive (list (or (cortex--id-at-point) (read-string "History of the headline with :ID: "))))
  (cortex--show "*cortex history*" (cortex--command "cortex.history" org-id) #'diff-mode))

;;;###autoload
(defun cortex-diff (&optional ref)
  "Show in `diff-mode' what changed in the saved file since snapshot REF.
REF is HEAD unless given.  With a prefix argument, ask for REF."
  (interactive (list (and current-prefix-arg (read-string "Since snapshot: " nil nil "HEAD"))))
  (unless buffer-file-name
    (user-error "cortex: this buffer visits no file"))
  (cortex--show "*cortex diff*" (cortex--command "cortex.diff" (cortex--uri buffer-file-name) (or ref "HEAD"))
                #'diff-mode))

(defun cortex--proposal-names (text)
  "The names of the pending proposals listed in TEXT."
  (let (names)
    (with-temp-buffer
      (insert text)
      (goto-char (point-min))
      (while (re-search-forward "^\\(\\S-+\\) pending " nil t)
        (push (match-string-no-properties 1) names)))
    (nreverse names)))

;;;###autoload
(defun cortex-accept-proposal (name)
  "Accept the pending proposal NAME: the files receive it."
  (interactive (list (read-string "Accept proposal: ")))
  (message "cortex: %s" (cortex--command "cortex.acceptProposal" name)))

;;;###autoload
(defun cortex-reject-proposal (name &optional reason)
  "Reject the pending proposal NAME, for REASON."
  (interactive (list (read-string "Reject proposal: ") (read-string "Reason: ")))
  (message "cortex: %s" (cortex--command "cortex.rejectProposal" name (or reason ""))))

;;;###autoload
(defun cortex-review ()
  "Show the pending proposals with their patches; accept or reject one."
  (interactive)
  (let* ((text (cortex--command "cortex.proposals"))
         (names (cortex--proposal-names text)))
    (if (null names)
        (message "cortex: %s" text)
      (cortex--show "*cortex proposals*" text #'diff-mode)
      (let ((name (completing-read "Proposal: " (cortex--ranked names) nil t)))
        (pcase (car (read-multiple-choice (format "Proposal %s: " name)
                                          '((?a "accept") (?r "reject") (?q "leave it pending"))))
          (?a (cortex-accept-proposal name))
          (?r (cortex-reject-proposal name (read-string "Reason: "))))))))

(provide 'cortex)
;;; cortex.el ends here
